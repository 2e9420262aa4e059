"""Evals pushed by Prime's official CLI (``prime eval push``): create, sample batches, finalize.

Nothing staged is visible: an open eval is its uploader's alone, its batches' bytes live in the
staging area, and only the finalize attaches it (through the native attach's service). What one
eval may hold is bounded here, in the transaction that admits each batch, so concurrent batches
cannot race past it. A finalized eval keeps its row as the alias of the eval it became (the
``evaluation_id`` the client printed); the alias goes with that eval (``ON DELETE CASCADE``).
"""

from __future__ import annotations

from typing import Any

from hub_server.db.catalog import Viewer
from hub_server.db.clock import now
from hub_server.db.engine import Database, typed
from hub_server.db.rows import PlacedEvalRow, StagedEvalRow
from hub_server.errors import NotAllowed, NotFound, Unstorable

PLACED = (
    "SELECT ev.id, e.id AS env_id, e.owner, e.name, e.visibility, v.version, ev.uploaded_by, "
    "ev.created_at, ev.model, ev.summary, ev.num_rollouts, ev.metadata_blob, ev.results_blob, "
    "s.id AS alias FROM evals ev JOIN versions v ON v.id = ev.version_id "
    "JOIN environments e ON e.id = v.env_id LEFT JOIN staged_evals s ON s.eval_id = ev.id "
)


class StagedEvals:
    def __init__(self, database: Database) -> None:
        self.database = database
        self.postgres = database.dialect == "postgresql"

    def collect(self) -> list[str]:
        """Forget open evals past their expiry; the ids of their batches (whose bytes go)."""
        stamp = now()
        with self.database.transaction() as db:
            rows = db.execute(
                "SELECT b.id FROM staged_eval_batches b JOIN staged_evals s ON s.id = b.staged_eval "
                "WHERE s.eval_id IS NULL AND s.expires_at < ?",
                (stamp,),
            ).fetchall()
            db.execute(
                "DELETE FROM staged_evals WHERE eval_id IS NULL AND expires_at < ?", (stamp,)
            )
        return [row["id"] for row in rows]

    def open(
        self,
        staged_id: str,
        user_id: int,
        env_id: int,
        version_id: int,
        metadata: str,
        expires_at: str,
        max_open: int,
    ) -> None:
        with self.database.transaction() as db:
            if self.postgres:  # one user's creates one at a time, so the count holds
                db.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(?))", (f"staged-evals:{user_id}",)
                )
            count = db.execute(
                "SELECT COUNT(*) AS n FROM staged_evals WHERE user_id=? AND eval_id IS NULL",
                (user_id,),
            ).fetchone()["n"]
            if count >= max_open:
                raise NotAllowed(
                    "too_many_open_evals",
                    f"you have {count} evaluations open (limit {max_open}): finalize them, or "
                    "wait for them to expire",
                )
            db.execute(
                "INSERT INTO staged_evals (id, user_id, env_id, version_id, metadata, created_at, "
                "expires_at) VALUES (?,?,?,?,?,?,?)",
                (staged_id, user_id, env_id, version_id, metadata, now(), expires_at),
            )

    def get(self, staged_id: str, user_id: int | None = None) -> StagedEvalRow | None:
        """The staged eval (the caller's own where ``user_id`` is given; an open one only
        before it expires)."""
        with self.database.read() as db:
            row = db.execute(
                "SELECT * FROM staged_evals WHERE id=? AND (eval_id IS NOT NULL OR expires_at >= ?)",
                (staged_id, now()),
            ).fetchone()
        if row is None or (user_id is not None and row["user_id"] != user_id):
            return None
        return typed(StagedEvalRow, row)

    def reserve_batch(
        self, staged_id: str, user_id: int, batch_id: str, size: int, max_bytes: int, expires: str
    ) -> None:
        """Admit a batch of ``size`` bytes into the caller's open eval, within ``max_bytes``
        for the whole eval; the eval's expiry moves to ``expires`` (a long upload stays open)."""
        with self.database.transaction() as db:
            lock = " FOR UPDATE" if self.postgres else ""
            row = db.execute(
                "SELECT id FROM staged_evals WHERE id=? AND user_id=? AND eval_id IS NULL "
                f"AND expires_at >= ?{lock}",
                (staged_id, user_id, now()),
            ).fetchone()
            if row is None:
                raise NotFound(
                    "evaluation_not_found", "no open evaluation with this id: create it again"
                )
            held = db.execute(
                "SELECT coalesce(sum(size), 0) AS bytes, coalesce(max(seq), 0) AS seq "
                "FROM staged_eval_batches WHERE staged_eval=?",
                (staged_id,),
            ).fetchone()
            if held["bytes"] + size > max_bytes:
                raise Unstorable(
                    "eval_too_large",
                    f"an evaluation's samples are limited to {max_bytes // (1024 * 1024)} MiB "
                    f"(this one holds {held['bytes']} bytes; this batch is {size})",
                )
            db.execute(
                "INSERT INTO staged_eval_batches (id, staged_eval, seq, size) VALUES (?,?,?,?)",
                (batch_id, staged_id, held["seq"] + 1, size),
            )
            db.execute("UPDATE staged_evals SET expires_at=? WHERE id=?", (expires, staged_id))

    def batch_stored(self, batch_id: str) -> bool:
        """Mark a batch's bytes as kept; False when its eval was finalized or collected since."""
        with self.database.transaction() as db:
            row = db.execute(
                "UPDATE staged_eval_batches SET stored=1 WHERE id=? RETURNING id", (batch_id,)
            ).fetchone()
        return row is not None

    def drop_batch(self, batch_id: str) -> None:
        with self.database.transaction() as db:
            db.execute("DELETE FROM staged_eval_batches WHERE id=?", (batch_id,))

    def batches(self, staged_id: str) -> list[Any]:
        """The eval's batches in arrival order (``id``, ``stored``)."""
        with self.database.read() as db:
            return db.execute(
                "SELECT id, stored FROM staged_eval_batches WHERE staged_eval=? ORDER BY seq",
                (staged_id,),
            ).fetchall()

    def finish(self, staged_id: str, eval_id: int) -> list[str]:
        """The eval is attached as ``eval_id``: the staged row becomes its alias, and the ids of
        its batches (whose bytes go) are returned."""
        with self.database.transaction() as db:
            rows = db.execute(
                "SELECT id FROM staged_eval_batches WHERE staged_eval=?", (staged_id,)
            ).fetchall()
            db.execute("DELETE FROM staged_eval_batches WHERE staged_eval=?", (staged_id,))
            db.execute("UPDATE staged_evals SET eval_id=? WHERE id=?", (eval_id, staged_id))
        return [row["id"] for row in rows]

    # --- attached evals, as the official client reads them ------------------------------------------
    def placed(self, public_id: str) -> PlacedEvalRow | None:
        """An attached eval by its id (digits) or its alias."""
        where, key = (
            ("ev.id=?", int(public_id))
            if public_id.isascii() and public_id.isdigit()
            else ("s.id=?", public_id)
        )
        if isinstance(key, int) and key >= 2**63:
            return None
        with self.database.read() as db:
            row = db.execute(PLACED + f"WHERE {where}", (key,)).fetchone()
        return None if row is None else typed(PlacedEvalRow, row)

    def listing(
        self,
        viewer: Viewer,
        uploaded_by: str | None,
        owner: str | None,
        name: str | None,
        skip: int,
        limit: int,
    ) -> tuple[list[PlacedEvalRow], int]:
        """Attached evals the viewer may read, newest first, and how many there are."""
        clauses: list[str] = []
        params: list[Any] = []
        if not viewer.sees_all:
            marks = ",".join("?" * len(viewer.namespaces)) or "NULL"
            clauses.append(f"(e.visibility = 'public' OR e.owner IN ({marks}))")
            params.extend(viewer.namespaces)
        for column, value in (
            ("ev.uploaded_by", uploaded_by),
            ("e.owner", owner),
            ("e.name", name),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = ("WHERE " + " AND ".join(clauses) + " ") if clauses else ""
        with self.database.read() as db:
            total = db.execute(
                "SELECT COUNT(*) AS n FROM evals ev JOIN versions v ON v.id = ev.version_id "
                f"JOIN environments e ON e.id = v.env_id {where}",
                params,
            ).fetchone()["n"]
            rows = db.execute(
                PLACED + where + "ORDER BY ev.id DESC LIMIT ? OFFSET ?", [*params, limit, skip]
            ).fetchall()
        return [typed(PlacedEvalRow, r) for r in rows], total
