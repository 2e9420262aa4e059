"""What the simple index reads: an environment's few index columns, and the files its page
lists. Every install asks for a page, so the first read is the narrowest one that decides who
may see it and which cached page is current (its id, ``created_at`` and ``serial``), never the
whole row (whose README may be large)."""

from __future__ import annotations

from packaging.version import Version

from hub_server.db.engine import Database, typed
from hub_server.db.rows import IndexHead, IndexRow

HEAD = (
    "SELECT id, owner, name, distribution, visibility, created_at, serial "
    "FROM environments WHERE owner=? AND name=?"
)


class IndexReads:
    def __init__(self, database: Database) -> None:
        self.database = database

    def head(self, owner: str, name: str) -> IndexHead | None:
        with self.database.read() as db:
            row = db.execute(HEAD, (owner, name)).fetchone()
        return None if row is None else IndexHead(**row)

    def rows(self, env_id: int) -> list[IndexRow]:
        """What a simple-index page lists: every wheel and sdist with its version's index fields
        (never a source archive, which is no package an installer could build)."""
        with self.database.read() as db:
            rows = db.execute(
                "SELECT f.filename, f.sha256, f.size, f.upload_time, f.metadata_sha256, "
                "v.version, v.yanked, v.yanked_reason, v.requires_python "
                "FROM files f JOIN versions v ON v.id=f.version_id "
                "WHERE f.env_id=? AND f.kind IN ('wheel', 'sdist')",
                (env_id,),
            ).fetchall()
        return sorted(
            (typed(IndexRow, r) for r in rows), key=lambda r: (Version(r.version), r.filename)
        )
