"""What an environment's web page lists, read on one connection: its versions, their files and
their evals. Each statement selects by the environment (none waits on another's answer), so on
PostgreSQL the three go out in one pipeline: the pool's check and one round trip, where reading
the files and evals by the versions' ids took four, and each statement apart six. Under load a
round trip is a wait for the database's process and then this one's to be scheduled again: the
first render of a page spent ~35 ms of its ~40 waiting on them at c=32, for ~1.6 ms of CPU."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from hub_server.db.attachments import EVAL_COLUMNS
from hub_server.db.engine import Database, typed
from hub_server.db.rows import EvalRow, FileRow, VersionRow

VERSIONS = "SELECT * FROM versions WHERE env_id=?"
FILES = "SELECT * FROM files WHERE env_id=? ORDER BY filename"
EVALS = (
    f"SELECT {EVAL_COLUMNS} FROM evals WHERE version_id IN "
    "(SELECT id FROM versions WHERE env_id=?) ORDER BY id"
)


@dataclass(frozen=True)
class PageRows:
    versions: list[VersionRow]  # oldest first (PEP 440)
    files: dict[int, list[FileRow]]  # by version id, each by filename
    evals: list[EvalRow]  # oldest first


class PageReads:
    def __init__(self, database: Database) -> None:
        self.database = database

    def rows(self, env_id: int) -> PageRows:
        """Each statement its own snapshot, as before: a version deleted between them is left
        out of the files and evals too, never shown half."""
        with self.database.read() as db:
            with db.pipeline():
                cursors = [db.execute(sql, (env_id,)) for sql in (VERSIONS, FILES, EVALS)]
            version_rows, file_rows, eval_rows = (cursor.fetchall() for cursor in cursors)
        versions = sorted(
            (typed(VersionRow, r) for r in version_rows), key=lambda r: Version(r.version)
        )
        files: dict[int, list[FileRow]] = {v.id: [] for v in versions}
        for row in file_rows:
            if row["version_id"] in files:
                files[row["version_id"]].append(typed(FileRow, row))
        evals = [typed(EvalRow, r) for r in eval_rows if r["version_id"] in files]
        return PageRows(versions, files, evals)
