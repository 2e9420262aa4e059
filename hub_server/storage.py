"""Storage for the hub: metadata in SQLite (with migrations), files in a blob store.

Both are interfaces (``MetadataStore``, ``BlobStore``) so a deployment can put metadata in
PostgreSQL and files in S3-compatible storage; the embedded defaults need nothing installed.
Blobs are content-addressed and written before the database row that makes them visible, so a
crash mid-publish leaves at most an unreferenced blob, never a visible half-version.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

MIGRATIONS = [
    """
    CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, is_admin INTEGER NOT NULL DEFAULT 0,
                        created_at TEXT NOT NULL);
    CREATE TABLE teams (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, created_at TEXT NOT NULL);
    CREATE TABLE team_members (team_id INTEGER NOT NULL REFERENCES teams(id), user_id INTEGER NOT NULL REFERENCES users(id),
                               role TEXT NOT NULL, PRIMARY KEY (team_id, user_id));
    CREATE TABLE tokens (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), name TEXT NOT NULL,
                         token_hash TEXT UNIQUE NOT NULL, scopes TEXT NOT NULL, created_at TEXT NOT NULL);
    CREATE TABLE environments (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL, distribution TEXT NOT NULL,
                               visibility TEXT NOT NULL, description TEXT, tags TEXT NOT NULL DEFAULT '[]', readme TEXT,
                               created_at TEXT NOT NULL, updated_at TEXT NOT NULL, UNIQUE (owner, name));
    CREATE TABLE versions (id INTEGER PRIMARY KEY, env_id INTEGER NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
                           version TEXT NOT NULL, created_at TEXT NOT NULL, yanked INTEGER NOT NULL DEFAULT 0,
                           yanked_reason TEXT, content_hash TEXT NOT NULL, requires_python TEXT, dependencies TEXT NOT NULL,
                           summary TEXT, UNIQUE (env_id, version));
    CREATE TABLE files (id INTEGER PRIMARY KEY, version_id INTEGER NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
                        filename TEXT NOT NULL, kind TEXT NOT NULL, sha256 TEXT NOT NULL, size INTEGER NOT NULL,
                        blob TEXT NOT NULL, metadata_blob TEXT, metadata_sha256 TEXT, upload_time TEXT NOT NULL);
    CREATE UNIQUE INDEX files_unique ON files (version_id, filename);
    CREATE TABLE evals (id INTEGER PRIMARY KEY, version_id INTEGER NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
                        uploaded_by TEXT NOT NULL, created_at TEXT NOT NULL, model TEXT, summary TEXT NOT NULL,
                        num_rollouts INTEGER NOT NULL, metadata_blob TEXT NOT NULL, results_blob TEXT NOT NULL);
    """,
    # v2: downloads are counted for sorting
    "ALTER TABLE environments ADD COLUMN downloads INTEGER NOT NULL DEFAULT 0;",
    # v3: tokens expire and can be revoked
    "ALTER TABLE tokens ADD COLUMN expires_at TEXT; ALTER TABLE tokens ADD COLUMN revoked_at TEXT;",
    # v4: the top-level modules each version installs (no two environments may share one)
    "ALTER TABLE versions ADD COLUMN top_level TEXT NOT NULL DEFAULT '[]';",
    # v5: an eval run attaches to a version once
    "ALTER TABLE evals ADD COLUMN run_id TEXT; CREATE UNIQUE INDEX evals_run ON evals (version_id, run_id);",
    # v6: datasets generated from a version's rollouts (vf-data), attached like evals
    """CREATE TABLE datasets (id INTEGER PRIMARY KEY, version_id INTEGER NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
                              uploaded_by TEXT NOT NULL, created_at TEXT NOT NULL, rows INTEGER NOT NULL,
                              filter TEXT NOT NULL, models TEXT NOT NULL, card_blob TEXT NOT NULL, data_blob TEXT NOT NULL,
                              data_sha256 TEXT NOT NULL, UNIQUE (version_id, data_sha256));""",
    # v7: web sessions (a hashed cookie, tied to the API token it was exchanged for)
    """CREATE TABLE sessions (session_hash TEXT PRIMARY KEY, token_id INTEGER NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,
                              created_at TEXT NOT NULL, expires_at TEXT NOT NULL);""",
]


class MetadataStore(Protocol):
    def transaction(self) -> Iterator[sqlite3.Connection]: ...


class BlobStore(Protocol):
    def put(self, data: bytes) -> str: ...
    def get(self, key: str) -> bytes: ...
    def delete(self, key: str) -> None: ...


class SQLiteStore:
    """The embedded metadata store: one SQLite file, WAL mode, migrations by ``user_version``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        with self.transaction() as db:
            current = db.execute("PRAGMA user_version").fetchone()[0]
            for number, script in enumerate(MIGRATIONS[current:], start=current + 1):
                # statement by statement: executescript would commit the surrounding transaction
                for statement in filter(str.strip, script.split(";")):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(
                self.path, timeout=30, isolation_level=None, check_same_thread=False
            )
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            self._local.db = db
        return db

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        db = self._connection()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def read(self) -> sqlite3.Connection:
        return self._connection()


class LocalBlobStore:
    """Content-addressed files under a directory; writes are atomic (temp file + rename)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        if not all(c in "0123456789abcdef" for c in key) or len(key) != 64:
            raise ValueError(f"bad blob key {key!r}")
        return self.root / key[:2] / key

    def put(self, data: bytes) -> str:
        key = hashlib.sha256(data).hexdigest()
        path = self._path(key)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        return key

    def get(self, key: str) -> bytes:
        return self._path(key).read_bytes()

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)
