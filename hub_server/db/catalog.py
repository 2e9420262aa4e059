"""Environments, versions, files, tags and downloads: every SQL statement about what the hub
holds, except search (``db.search``) and the simple index's reads (``db.index``).

A push reads and locks only its own environment (what it may install is decided by the package
alone, ``hub_server.services.package_rules``, never by other environments); an environment's latest
version and index serial live on its row, so listings never read its versions.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from hub_server.db.accounts import NAMESPACE_LOCK
from hub_server.db.clock import now, today
from hub_server.db.engine import Conflict, Database, typed, version_key
from hub_server.db.new_versions import (
    INSERT_VERSION,
    NewVersion,
    StoredFile,
    file_values,
    version_row,
)
from hub_server.db.rows import EnvironmentRow, FileRow, VersionRow
from hub_server.errors import Conflicting, NotAllowed


@dataclass(frozen=True)
class Viewer:
    """What a reader may see: every public environment, plus these namespaces (or all)."""

    namespaces: tuple[str, ...] = ()
    sees_all: bool = False


def latest_of(versions: list[Any]) -> str | None:
    """The newest non-yanked final release, else the newest non-yanked pre-release."""
    live = sorted((v for v in versions if not v["yanked"]), key=lambda v: Version(v["version"]))
    final = [v for v in live if not Version(v["version"]).is_prerelease]
    pick = final or live
    return pick[-1]["version"] if pick else None


def versions_of(db: Any, env_id: int) -> list[VersionRow]:
    """An environment's versions, oldest first (PEP 440 order), on the connection ``db``."""
    rows = db.execute("SELECT * FROM versions WHERE env_id=?", (env_id,)).fetchall()
    return sorted((typed(VersionRow, r) for r in rows), key=lambda r: Version(r.version))


def files_of_versions(db: Any, version_ids: list[int]) -> dict[int, list[FileRow]]:
    """The files of each of ``version_ids``, by filename, on the connection ``db``."""
    if not version_ids:
        return {}
    marks = ",".join("?" * len(version_ids))
    rows = db.execute(
        f"SELECT * FROM files WHERE version_id IN ({marks}) ORDER BY filename", version_ids
    ).fetchall()
    grouped: dict[int, list[FileRow]] = {v: [] for v in version_ids}
    for row in rows:
        grouped[row["version_id"]].append(typed(FileRow, row))
    return grouped


class Catalog:
    def __init__(self, database: Database) -> None:
        self.database = database
        self.postgres = database.dialect == "postgresql"

    # --- reading ---------------------------------------------------------------------------------
    def environment(self, owner: str, name: str) -> EnvironmentRow | None:
        with self.database.read() as db:
            row = db.execute(
                "SELECT * FROM environments WHERE owner=? AND name=?", (owner, name)
            ).fetchone()
        return None if row is None else typed(EnvironmentRow, row)

    def environment_by_id(self, env_id: int) -> EnvironmentRow | None:
        with self.database.read() as db:
            row = db.execute("SELECT * FROM environments WHERE id=?", (env_id,)).fetchone()
        return None if row is None else typed(EnvironmentRow, row)

    def versions(self, env_id: int) -> list[VersionRow]:
        with self.database.read() as db:
            return versions_of(db, env_id)

    def version(self, env_id: int, version: str) -> VersionRow | None:
        with self.database.read() as db:
            row = db.execute(
                "SELECT * FROM versions WHERE env_id=? AND version_key=?",
                (env_id, version_key(version)),
            ).fetchone()
        return None if row is None else typed(VersionRow, row)

    def files_of_versions(self, version_ids: list[int]) -> dict[int, list[FileRow]]:
        with self.database.read() as db:
            return files_of_versions(db, version_ids)

    def file(self, env_id: int, filename: str) -> FileRow | None:
        with self.database.read() as db:
            row = db.execute(
                "SELECT * FROM files WHERE env_id=? AND filename=?", (env_id, filename)
            ).fetchone()
        return None if row is None else typed(FileRow, row)

    # --- writing ---------------------------------------------------------------------------------
    def commit_version(
        self,
        new: NewVersion,
        files: list[StoredFile],
        within: Callable[[Any], None] | None = None,
    ) -> tuple[int, int]:
        """Make the version visible in one transaction: (env_id, version_id). Blobs are written
        before this; a crash before the commit leaves only unreferenced blobs. ``within(db)``
        runs in the transaction (the blob leases' give-back, ``hub_server.db.blob_leases``)."""
        stamp = now()
        try:
            with self.database.transaction() as db:
                self._lock_environment(db, new)
                self._check_publisher(db, new)
                env = self._environment_for_update(db, new, stamp)
                versions = db.execute(
                    "SELECT version, yanked FROM versions WHERE env_id=?", (env["id"],)
                ).fetchall()
                retired = db.execute(
                    "SELECT 1 FROM retired_names WHERE owner=? AND name_key=? AND version_key=?",
                    (new.owner, canonicalize_name(new.name), version_key(new.version)),
                ).fetchone() or db.execute(
                    "SELECT 1 FROM retired_versions WHERE env_id=? AND version_key=?",
                    (env["id"], version_key(new.version)),
                ).fetchone()
                if retired:
                    raise self._version_retired(new)
                if any(version_key(v["version"]) == version_key(new.version) for v in versions):
                    raise self._version_exists(new)
                version_id = db.execute(
                    f"{INSERT_VERSION} RETURNING id", version_row(env["id"], new, stamp)
                ).fetchone()["id"]
                for f in files:
                    db.execute(
                        "INSERT INTO files (version_id, env_id, filename, kind, sha256, size, blob, "
                        "metadata_blob, metadata_sha256, upload_time) VALUES (?,?,?,?,?,?,?,?,?,?)",
                        (version_id, env["id"], *file_values(f, stamp)),
                    )
                if within is not None:
                    within(db)
                latest = latest_of([*versions, {"version": new.version, "yanked": 0}])
                db.execute(
                    "UPDATE environments SET latest_version=?, serial=serial+1 WHERE id=?",
                    (latest, env["id"]),
                )
        except Conflict as exc:
            if "files" in str(exc) or "filename" in str(exc):
                raise Conflicting(
                    "file_exists", "that file was already published; files are never replaced"
                ) from None
            if "name_key" in str(exc):
                raise self._name_clash(new) from None
            raise self._version_exists(new) from None
        return env["id"], version_id

    def _check_publisher(self, db: Any, new: NewVersion) -> None:
        """The token the push was authorized with still stands at its commit: an account
        deleted (``services.account_deletion``) or a token revoked while the upload ran
        publishes nothing, so a push cannot land in a namespace whose owner is gone, or is
        someone else who registered the name since. On PostgreSQL a shared hold on the lock an
        account deletion takes exclusively orders the two (SQLite has one writer)."""
        if new.token_id is None:
            return
        if self.postgres:
            db.execute("SELECT pg_advisory_xact_lock_shared(?)", (NAMESPACE_LOCK,))
        row = db.execute(
            "SELECT 1 FROM tokens WHERE id=? AND revoked_at IS NULL", (new.token_id,)
        ).fetchone()
        if row is None:
            raise NotAllowed(
                "invalid_token",
                "the token this push was made with was revoked, or its account deleted, while "
                "it uploaded: nothing was published",
            )

    def _lock_environment(self, db: Any, new: NewVersion) -> None:
        """Serialize pushes to one environment, including the first two, which would both find
        no row to lock and race to create it (SQLite writers are serialized already)."""
        if self.postgres:
            key = f"environment:{new.owner}/{canonicalize_name(new.name)}"
            db.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (key,))

    def _environment_for_update(self, db: Any, new: NewVersion, stamp: str) -> Any:
        lock = " FOR UPDATE" if self.postgres else ""
        env = db.execute(
            f"SELECT * FROM environments WHERE owner=? AND name=?{lock}", (new.owner, new.name)
        ).fetchone()
        tags = json.dumps(new.tags)
        if env is None:
            clash = db.execute(
                "SELECT name FROM environments WHERE owner=? AND name_key=?",
                (new.owner, canonicalize_name(new.name)),
            ).fetchone()
            if clash is not None:
                raise self._name_clash(new, clash["name"])
            env = db.execute(
                "INSERT INTO environments (owner, name, name_key, distribution, visibility, "
                "description, tags, readme, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?) "
                "RETURNING *",
                (
                    new.owner,
                    new.name,
                    canonicalize_name(new.name),
                    new.distribution,
                    new.visibility or "public",
                    new.description or new.summary,
                    tags,
                    new.readme,
                    stamp,
                    stamp,
                ),
            ).fetchone()
            self._set_tags(db, env["id"], new.tags)
            return env
        # visibility changes only when asked, and only by whoever may delete the environment
        if new.visibility not in (None, env["visibility"]) and not new.may_change_visibility:
            raise NotAllowed(
                "not_owner",
                f"only {new.owner} (or an owner of team {new.owner}) can change the visibility "
                f"of {new.owner}/{new.name}; push without --visibility to keep it",
            )
        db.execute(
            "UPDATE environments SET updated_at=?, readme=COALESCE(?, readme), "
            "description=COALESCE(?, description), visibility=COALESCE(?, visibility), tags=? "
            "WHERE id=?",
            (
                stamp,
                new.readme,
                new.description or new.summary,
                new.visibility,
                tags if new.tags else env["tags"],
                env["id"],
            ),
        )
        if new.tags:
            self._set_tags(db, env["id"], new.tags)
        return env

    @staticmethod
    def _set_tags(db: Any, env_id: int, tags: list[str]) -> None:
        db.execute("DELETE FROM environment_tags WHERE env_id=?", (env_id,))
        for tag in sorted(set(tags)):
            db.execute("INSERT INTO environment_tags (env_id, tag) VALUES (?,?)", (env_id, tag))

    @staticmethod
    def _version_exists(new: NewVersion) -> Conflicting:
        return Conflicting(
            "version_exists",
            f"{new.owner}/{new.name} {new.version} is already published and versions are "
            "immutable; bump the version (prime env push --bump patch)",
        )

    @staticmethod
    def _version_retired(new: NewVersion) -> Conflicting:
        return Conflicting(
            "version_exists",  # the same code: clients that bump on it keep working
            f"{new.owner}/{new.name} {new.version} was published and deleted; a deleted "
            "version's number is never reused (an install pinned to it must not get other "
            "bytes); bump the version (prime env push --bump patch)",
        )

    @staticmethod
    def _name_clash(new: NewVersion, existing: str | None = None) -> Conflicting:
        other = existing or "an environment"
        return Conflicting(
            "name_clash",
            f"{new.owner}/{other} exists and is the same name after normalization; "
            f"publish to {new.owner}/{other}",
        )

    def set_yanked(self, env_id: int, version_id: int, yanked: bool, reason: str | None) -> None:
        with self.database.transaction() as db:
            db.execute(
                "UPDATE versions SET yanked=?, yanked_reason=? WHERE id=?",
                (int(yanked), reason if yanked else None, version_id),
            )
            self._refresh(db, env_id)

    def delete_environment(self, env_id: int) -> None:
        """Remove the environment; every version number it published stays retired for its
        owner and name (``retired_names``), whoever publishes that name again."""
        with self.database.transaction() as db:
            for table in ("versions", "retired_versions"):
                db.execute(
                    "INSERT INTO retired_names (owner, name_key, version_key) "
                    f"SELECT e.owner, e.name_key, t.version_key FROM {table} t "
                    "JOIN environments e ON e.id = t.env_id WHERE e.id=? ON CONFLICT DO NOTHING",
                    (env_id,),
                )
            db.execute("DELETE FROM environments WHERE id=?", (env_id,))

    def delete_version(self, env_id: int, version_id: int) -> None:
        """Remove one version (its files, evals, datasets); its number is retired (files are
        never replaced)."""
        with self.database.transaction() as db:
            row = db.execute(
                "SELECT version_key FROM versions WHERE id=?", (version_id,)
            ).fetchone()
            db.execute(
                "INSERT INTO retired_versions (env_id, version_key) VALUES (?,?) "
                "ON CONFLICT DO NOTHING",
                (env_id, row["version_key"]),
            )
            db.execute(
                "INSERT INTO retired_names (owner, name_key, version_key) "
                "SELECT owner, name_key, ? FROM environments WHERE id=? ON CONFLICT DO NOTHING",
                (row["version_key"], env_id),
            )
            db.execute("DELETE FROM versions WHERE id=?", (version_id,))
            self._refresh(db, env_id)

    def _refresh(self, db: Any, env_id: int) -> None:
        versions = db.execute(
            "SELECT version, yanked FROM versions WHERE env_id=?", (env_id,)
        ).fetchall()
        db.execute(
            "UPDATE environments SET latest_version=?, serial=serial+1 WHERE id=?",
            (latest_of(versions), env_id),
        )

    def count_downloads(self, pending: set[tuple[int, int, str]]) -> None:
        """Record (environment, user, day) downloads; each counts once. A download of an
        environment deleted since (by any hub process) is dropped: its row is gone, and its id
        is never another environment's."""
        with self.database.transaction() as db:
            for env_id, user_id, day in sorted(pending):
                inserted = db.execute(
                    "INSERT INTO downloads (env_id, user_id, day) SELECT ?, ?, ? "
                    "WHERE EXISTS (SELECT 1 FROM environments WHERE id=?) ON CONFLICT DO NOTHING",
                    (env_id, user_id, day, env_id),
                ).rowcount
                if inserted:
                    db.execute(
                        "UPDATE environments SET downloads=downloads+1 WHERE id=?", (env_id,)
                    )


__all__ = ["Catalog", "NewVersion", "StoredFile", "Viewer", "latest_of", "today"]
