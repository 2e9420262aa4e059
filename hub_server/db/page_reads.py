"""What an environment's web page lists, read on one connection: its versions, their files and
their evals. On PostgreSQL each pooled connection handed out costs a round trip of its own (the
pool checks it), so the three statements apart cost six round trips and three thread-pool
waits; together, four and one. The statements are the catalog's and the attachments' own."""

from __future__ import annotations

from dataclasses import dataclass

from hub_server.db.attachments import evals_of_versions
from hub_server.db.catalog import files_of_versions, versions_of
from hub_server.db.engine import Database
from hub_server.db.rows import EvalRow, FileRow, VersionRow


@dataclass(frozen=True)
class PageRows:
    versions: list[VersionRow]  # oldest first (PEP 440)
    files: dict[int, list[FileRow]]  # by version id, each by filename
    evals: list[EvalRow]  # oldest first


class PageReads:
    def __init__(self, database: Database) -> None:
        self.database = database

    def rows(self, env_id: int) -> PageRows:
        with self.database.read() as db:
            versions = versions_of(db, env_id)
            ids = [v.id for v in versions]
            return PageRows(versions, files_of_versions(db, ids), evals_of_versions(db, ids))
