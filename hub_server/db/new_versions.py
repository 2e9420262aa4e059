"""What a new version brings to the catalog (``NewVersion``, its ``StoredFile``s) and the rows it
leaves in ``versions`` and ``files``: written by a push (``db.catalog``) and by the bulk load
(``db.bulk_load``), one declaration of each row for both."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hub_server.db.engine import version_key


@dataclass
class StoredFile:
    kind: str
    filename: str
    sha256: str
    size: int
    blob: str
    metadata_blob: str | None
    metadata_sha256: str | None


@dataclass
class NewVersion:
    owner: str
    name: str
    distribution: str
    version: str
    content_hash: str
    requires_python: str | None
    dependencies: list[str]
    summary: str | None
    top_level: list[str]
    visibility: str | None
    readme: str | None
    description: str | None
    tags: list[str]
    token_id: int | None = None  # the publisher's token: still there at the commit
    may_change_visibility: bool = False  # the namespace's user, a team owner or an admin


INSERT_VERSION = (
    "INSERT INTO versions (env_id, version, version_key, created_at, content_hash, "
    "requires_python, dependencies, summary, top_level) VALUES (?,?,?,?,?,?,?,?,?)"
)


def version_row(env_id: int, new: NewVersion, stamp: str) -> tuple[Any, ...]:
    """The values of ``INSERT_VERSION`` for ``new`` (a push and the bulk load store the same)."""
    return (
        env_id,
        new.version,
        version_key(new.version),
        stamp,
        new.content_hash,
        new.requires_python,
        json.dumps(new.dependencies),
        new.summary,
        json.dumps(new.top_level),
    )


def file_values(f: StoredFile, stamp: str) -> tuple[Any, ...]:
    """A file's columns after ``version_id, env_id`` in the ``files`` table, in order."""
    return (
        f.filename,
        f.kind,
        f.sha256,
        f.size,
        f.blob,
        f.metadata_blob,
        f.metadata_sha256,
        stamp,
    )
