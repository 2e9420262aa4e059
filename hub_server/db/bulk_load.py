"""Many versions written at once: the rows ``Catalog.commit_version`` would leave had each been
committed in turn, written in one transaction by a few statements each run over all the rows
(``executemany``: one pipeline on PostgreSQL), for a hub filled to size (``benchmarks/hub.py``
seeds 30,000 versions so; one commit each took half an hour on PostgreSQL).

The same rows, in the same order (so the same ids): each environment as its last version left
it (its README, description, visibility and tags as each push's ``COALESCE`` left them, its
latest version, a serial bumped once per version, created when its first version was), its tags,
its versions and their files; the search index follows the environment rows (triggers on SQLite,
a generated column on PostgreSQL), as it does for a push. What a push checks and refuses
(authorization, a version that exists or was deleted, a name clash) is not checked: the caller
loads versions it knows to be new. No blob is written or leased here: storing the files' bytes,
if they are to be downloaded, is the caller's (tests/hub_server/test_hub_bulk_load.py compares
these rows with those of commits one by one).
"""

from __future__ import annotations

import json
from typing import Any

from packaging.utils import canonicalize_name

from hub_server.db.catalog import latest_of
from hub_server.db.clock import now
from hub_server.db.engine import Database, version_key
from hub_server.db.new_versions import (
    INSERT_VERSION,
    NewVersion,
    StoredFile,
    file_values,
    version_row,
)

Batch = list[tuple[NewVersion, list[StoredFile]]]


def _environments(db: Any, owners: set[str]) -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for owner in sorted(owners):
        for row in db.execute("SELECT * FROM environments WHERE owner=?", (owner,)).fetchall():
            found[(row["owner"], row["name"])] = dict(row)
    return found


def _fold(env: dict[str, Any] | None, new: NewVersion, stamp: str) -> dict[str, Any]:
    """The environment row after a commit of ``new`` (``Catalog._environment_for_update``)."""
    described = new.description or new.summary
    if env is None:
        return {
            "owner": new.owner,
            "name": new.name,
            "distribution": new.distribution,
            "visibility": new.visibility or "public",
            "description": described,
            "tags": json.dumps(new.tags),
            "readme": new.readme,
            "created_at": stamp,
            "updated_at": stamp,
            "serial": 1,
            "new_tags": new.tags,
            "versions": [],
        }
    return {
        **env,
        "updated_at": stamp,
        "readme": env["readme"] if new.readme is None else new.readme,
        "description": env["description"] if described is None else described,
        "visibility": new.visibility or env["visibility"],
        "tags": json.dumps(new.tags) if new.tags else env["tags"],
        "serial": env["serial"] + 1,
        "new_tags": new.tags or env.get("new_tags"),
    }


def commit_versions(database: Database, batch: Batch) -> None:
    """Write ``batch`` (each version's ``NewVersion`` and its stored files, in publish order)
    as one transaction."""
    stamp = now()
    with database.transaction() as db:
        before = _environments(db, {new.owner for new, _ in batch})
        versions: dict[int, list[Any]] = {}
        for env in before.values():
            rows = db.execute(
                "SELECT version, yanked FROM versions WHERE env_id=?", (env["id"],)
            ).fetchall()
            versions[env["id"]] = [dict(row) for row in rows]
        after: dict[tuple[str, str], dict[str, Any]] = {}
        for new, _ in batch:
            key = (new.owner, new.name)
            env = _fold(after.get(key) or before.get(key), new, stamp)
            env["versions"] = [*env.get("versions", []), {"version": new.version, "yanked": 0}]
            after[key] = env
        created = [key for key in after if key not in before]
        db.executemany(
            "INSERT INTO environments (owner, name, name_key, distribution, visibility, "
            "description, tags, readme, created_at, updated_at, latest_version, serial) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    *key,
                    canonicalize_name(key[1]),
                    *(after[key][c] for c in ("distribution", "visibility", "description")),
                    *(after[key][c] for c in ("tags", "readme", "created_at", "updated_at")),
                    latest_of(after[key]["versions"]),
                    after[key]["serial"],
                )
                for key in created
            ],
        )
        updated = [key for key in after if key in before]
        db.executemany(
            "UPDATE environments SET updated_at=?, readme=?, description=?, visibility=?, "
            "tags=?, latest_version=?, serial=? WHERE id=?",
            [
                (
                    *(after[key][c] for c in ("updated_at", "readme", "description")),
                    *(after[key][c] for c in ("visibility", "tags")),
                    latest_of(versions[before[key]["id"]] + after[key]["versions"]),
                    after[key]["serial"],
                    before[key]["id"],
                )
                for key in updated
            ],
        )
        ids = {key: env["id"] for key, env in _environments(db, {o for o, _ in after}).items()}
        retagged = [key for key in after if key in created or after[key]["new_tags"]]
        db.executemany(
            "DELETE FROM environment_tags WHERE env_id=?",
            [(ids[key],) for key in retagged if key in before],
        )
        db.executemany(
            "INSERT INTO environment_tags (env_id, tag) VALUES (?,?)",
            [(ids[k], tag) for k in retagged for tag in sorted(set(after[k]["new_tags"] or []))],
        )
        db.executemany(
            INSERT_VERSION,
            [version_row(ids[(new.owner, new.name)], new, stamp) for new, _ in batch],
        )
        db.executemany(
            "INSERT INTO files (version_id, env_id, filename, kind, sha256, size, blob, "
            "metadata_blob, metadata_sha256, upload_time) SELECT id, env_id, ?,?,?,?,?,?,?,? "
            "FROM versions WHERE env_id=? AND version_key=?",
            [
                (*file_values(f, stamp), ids[(new.owner, new.name)], version_key(new.version))
                for new, files in batch
                for f in files
            ],
        )
