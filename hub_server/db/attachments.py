"""Eval results and datasets attached to a version: every SQL statement about them.

Quotas are checked inside the transaction that inserts, under a lock on the version, so
concurrent uploads cannot race past a limit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from hub_server.db.clock import now
from hub_server.db.engine import Conflict, Database, typed
from hub_server.db.rows import DatasetRow, EnvironmentRow, EvalRow
from hub_server.errors import Conflicting, NotAllowed

Within = Callable[[Any], None] | None  # run inside an insert's transaction
R = TypeVar("R")


@dataclass
class NewEval:
    version_id: int
    uploaded_by: str
    model: str | None
    summary: dict[str, Any]
    num_rollouts: int
    metadata_blob: str
    results_blob: str
    run_id: str
    histogram: dict[str, Any]


@dataclass
class NewDataset:
    version_id: int
    uploaded_by: str
    rows: int
    filter: str
    models: list[str]
    card_blob: str
    data_blob: str
    data_sha256: str


# what a page shows of an eval (``EvalRow``), never its stored blobs
EVAL_COLUMNS = "id, version_id, uploaded_by, created_at, model, summary, num_rollouts, histogram"


def evals_of_versions(db: Any, version_ids: list[int]) -> list[EvalRow]:
    """The evals of ``version_ids`` (what a page shows of them), oldest first, on ``db``."""
    if not version_ids:
        return []
    marks = ",".join("?" * len(version_ids))
    rows = db.execute(
        f"SELECT {EVAL_COLUMNS} FROM evals WHERE version_id IN ({marks}) ORDER BY id",
        version_ids,
    ).fetchall()
    return [typed(EvalRow, row) for row in rows]


class Attachments:
    def __init__(self, database: Database) -> None:
        self.database = database
        self.postgres = database.dialect == "postgresql"

    def _lock_version(self, db: Any, version_id: int) -> None:
        if self.postgres:
            db.execute("SELECT id FROM versions WHERE id=? FOR UPDATE", (version_id,))

    def _quota(self, db: Any, table: str, version_id: int, limit: int, what: str) -> None:
        self._lock_version(db, version_id)
        count = db.execute(
            f"SELECT COUNT(*) AS n FROM {table} WHERE version_id=?", (version_id,)
        ).fetchone()["n"]
        if count >= limit:
            raise NotAllowed(
                f"{table[:-1]}_quota",
                f"this version already has {count} {what} (limit {limit})",
            )

    def add_eval(self, new: NewEval, limit: int, within: Within = None) -> EvalRow:
        """Insert the eval (``within(db)`` runs in its transaction: the blob leases' give-back)."""
        return self._attach(
            EvalRow,
            "evals",
            new.version_id,
            limit,
            "INSERT INTO evals (version_id, uploaded_by, created_at, model, summary, "
            "num_rollouts, metadata_blob, results_blob, run_id, histogram) "
            "VALUES (?,?,?,?,?,?,?,?,?,?) RETURNING *",
            lambda: (
                new.version_id,
                new.uploaded_by,
                now(),
                new.model,
                json.dumps(new.summary),
                new.num_rollouts,
                new.metadata_blob,
                new.results_blob,
                new.run_id,
                json.dumps(new.histogram),
            ),
            within,
            Conflicting("eval_exists", f"run {new.run_id} is already attached to this version"),
        )

    def _attach(
        self,
        row_type: type[R],
        table: str,
        version_id: int,
        limit: int,
        insert: str,
        values: Callable[[], tuple[Any, ...]],
        within: Within,
        exists: Conflicting,
    ) -> R:
        """Insert one attachment under the version's quota (its ``values`` made inside the
        transaction, after the quota's lock: the row's ``created_at`` is stamped there), with
        ``within(db)`` in the same transaction; ``exists`` when one is already attached."""
        try:
            with self.database.transaction() as db:
                self._quota(db, table, version_id, limit, table)
                row = db.execute(insert, values()).fetchone()
                if within is not None:
                    within(db)
                return typed(row_type, row)
        except Conflict:
            raise exists from None

    def evals(self, version_ids: list[int]) -> list[EvalRow]:
        with self.database.read() as db:
            return evals_of_versions(db, version_ids)

    def environment_with_evals_mark(
        self, owner: str, name: str
    ) -> tuple[EnvironmentRow, tuple[int, int], int] | None:
        """The environment's row, its evals' mark (how many evals its versions hold, and the
        newest one's id) and the catalog's generation, in one snapshot. Evals are only ever
        added (a version's go with it, and deleting a version changes its environment's row),
        so any change to what an environment page shows of them changes the mark. One query on
        one pooled connection: on PostgreSQL two round trips (the pool's check, then this),
        where the row and the mark read apart cost four."""
        with self.database.read() as db:
            row = db.execute(
                "SELECT env.*, "
                "(SELECT generation FROM catalog_state WHERE id=1) AS catalog_generation, "
                "(SELECT COUNT(*) FROM evals e JOIN versions v ON v.id = e.version_id "
                "WHERE v.env_id = env.id) AS evals_count, "
                "(SELECT COALESCE(MAX(e.id), 0) FROM evals e JOIN versions v "
                "ON v.id = e.version_id WHERE v.env_id = env.id) AS evals_newest "
                "FROM environments env WHERE env.owner=? AND env.name=?",
                (owner, name),
            ).fetchone()
        if row is None:
            return None
        mark = (row["evals_count"], row["evals_newest"])
        return typed(EnvironmentRow, row), mark, row["catalog_generation"]

    def add_dataset(self, new: NewDataset, limit: int, within: Within = None) -> DatasetRow:
        """Insert the dataset (``within(db)`` runs in its transaction, as for ``add_eval``)."""
        return self._attach(
            DatasetRow,
            "datasets",
            new.version_id,
            limit,
            "INSERT INTO datasets (version_id, uploaded_by, created_at, rows, filter, "
            "models, card_blob, data_blob, data_sha256) VALUES (?,?,?,?,?,?,?,?,?) "
            "RETURNING *",
            lambda: (
                new.version_id,
                new.uploaded_by,
                now(),
                new.rows,
                new.filter,
                json.dumps(new.models),
                new.card_blob,
                new.data_blob,
                new.data_sha256,
            ),
            within,
            Conflicting("dataset_exists", "this dataset is already attached to this version"),
        )

    def datasets(self, version_id: int) -> list[DatasetRow]:
        with self.database.read() as db:
            rows = db.execute(
                "SELECT * FROM datasets WHERE version_id=? ORDER BY id", (version_id,)
            ).fetchall()
        return [typed(DatasetRow, row) for row in rows]

    def dataset(self, version_id: int, dataset_id: int) -> DatasetRow | None:
        with self.database.read() as db:
            row = db.execute(
                "SELECT * FROM datasets WHERE id=? AND version_id=?", (dataset_id, version_id)
            ).fetchone()
        return None if row is None else typed(DatasetRow, row)
