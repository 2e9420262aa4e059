"""Leases and claims on blobs: what keeps the orphan collector from deleting a blob that a push
is storing, on every store (S3 has no conditional delete, so the database decides).

A writer leases a blob's key (``take``, committed) *before* it writes the bytes, and hands the
lease back (``give_back``) in the transaction that commits the row referring to the blob. The
collector claims a key (``claim``) in one transaction that finds no live lease, no claim of
another collector and no row referring to the blob, deletes the bytes only after that commit,
then drops its claim (``unclaim``). Every one of these statements first takes the key's lock (an
advisory lock on PostgreSQL; SQLite's writers are serialized already), so:

- a lease taken before the claim makes the claim fail (the lease is live);
- a lease asked for while the claim stands waits (``take`` answers False) until the delete is
  done and the claim dropped, so the push's write lands after the delete, never before it;
- a give-back committed before the claim committed its row too, and the claim's reference check
  (a statement after the lock, so it sees that commit) finds the row.

A lease older than the collector's grace period is presumed dead (a push killed after leasing):
the claim takes it over, and a push that was merely that slow finds its lease gone at its commit
(``blob_collected``, a 503: nothing is published, push again). A claim older than ``CLAIM_TTL`` is a
collector that died between its claim and its delete; a writer takes it over. A collector that
only stalled that long (a paused VM, a delete stuck in retries) deletes under the key's lock,
after reading its claim again (``delete_claimed``): taken over, the claim is gone and nothing is
deleted, since the writer's row may refer to the blob now; and no writer can take it over while
the delete runs.
"""

from __future__ import annotations

import hashlib
import io
import logging
import secrets
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, BinaryIO

from hub_server.db.blob_references import is_referenced
from hub_server.db.blobs import BlobStore
from hub_server.db.engine import Database
from hub_server.errors import Unavailable

log = logging.getLogger(__name__)

CLAIM_TTL = 600.0  # longer than one delete call with the S3 client's retries and timeouts
LEASE_WAIT_S = 30.0  # an upload waits this long for a collector's claim to be dropped
LEASE_POLL_S = 0.05


class BlobLeases:
    def __init__(self, database: Database) -> None:
        self.database = database
        self.postgres = database.dialect == "postgresql"

    def _lock(self, db: Any, key: str) -> None:
        if self.postgres:
            db.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (f"blob:{key}",))

    def take(self, key: str, holder: str) -> bool:
        """Lease ``key`` for ``holder`` (committed before the blob is written); False while a
        collector's claim on it stands (ask again once it is dropped)."""
        stamp = time.time()
        with self.database.transaction() as db:
            self._lock(db, key)
            claim = db.execute("SELECT claimed_at FROM blob_claims WHERE key=?", (key,)).fetchone()
            if claim is not None:
                if claim["claimed_at"] > stamp - CLAIM_TTL:
                    return False
                db.execute("DELETE FROM blob_claims WHERE key=?", (key,))  # its collector died
            db.execute(
                "INSERT INTO blob_leases (key, holder, taken_at) VALUES (?,?,?)",
                (key, holder, stamp),
            )
        return True

    def give_back(self, db: Any, held: dict[str, str]) -> None:
        """Inside the transaction that commits the rows referring to ``held`` (key: holder):
        end each lease, or raise ``Unavailable`` ``blob_collected`` (rolling that transaction back) for one the
        collector took over, whose blob may be gone."""
        for key in sorted(held):  # one order for every writer: no deadlock between two pushes
            self._lock(db, key)
            ended = db.execute(
                "DELETE FROM blob_leases WHERE key=? AND holder=?", (key, held[key])
            ).rowcount
            if not ended:
                raise Unavailable(
                    "blob_collected",
                    "this upload took longer than the hub's blob grace period and its stored "
                    "files were collected; nothing was published: send it again",
                )

    def release(self, held: dict[str, str]) -> None:
        """End the leases of an upload that commits nothing (refused, failed): its blobs are
        orphans now, collected after the grace period."""
        if not held:
            return
        with self.database.transaction() as db:
            for key in sorted(held):
                self._lock(db, key)
                db.execute("DELETE FROM blob_leases WHERE key=? AND holder=?", (key, held[key]))

    def claim(self, key: str, holder: str, grace_s: float) -> bool:
        """Claim ``key`` for deletion: True, committed, when no lease younger than ``grace_s``,
        no other live claim and no row refers to the blob (older leases are taken over)."""
        stamp = time.time()
        with self.database.transaction() as db:
            self._lock(db, key)  # first: every check below sees what committed before it
            leased = db.execute(
                "SELECT 1 FROM blob_leases WHERE key=? AND taken_at > ?", (key, stamp - grace_s)
            ).fetchone()
            claimed = db.execute(
                "SELECT 1 FROM blob_claims WHERE key=? AND claimed_at > ?",
                (key, stamp - CLAIM_TTL),
            ).fetchone()
            if leased or claimed or is_referenced(db, key):
                return False
            db.execute("DELETE FROM blob_leases WHERE key=?", (key,))
            db.execute("DELETE FROM blob_claims WHERE key=?", (key,))
            db.execute(
                "INSERT INTO blob_claims (key, holder, claimed_at) VALUES (?,?,?)",
                (key, holder, stamp),
            )
        return True

    def delete_claimed(self, key: str, holder: str, delete: Callable[[], bool]) -> bool:
        """``delete()`` (the blob's removal from the store, its answer returned) under the key's
        lock, only while ``holder``'s claim still stands and no lease or row has come to the
        blob: the claim is read again here, not trusted from ``claim``, so a collector that
        stalled past ``CLAIM_TTL`` and had its claim taken over by a writer deletes nothing."""
        with self.database.transaction() as db:
            self._lock(db, key)
            mine = db.execute(
                "SELECT 1 FROM blob_claims WHERE key=? AND holder=?", (key, holder)
            ).fetchone()
            leased = db.execute("SELECT 1 FROM blob_leases WHERE key=?", (key,)).fetchone()
            if mine is None or leased or is_referenced(db, key):
                log.warning(
                    "the claim on blob %s was taken over before its delete (the collector "
                    "stalled past %gs): the blob is kept",
                    key,
                    CLAIM_TTL,
                )
                return False
            return delete()

    def unclaim(self, key: str, holder: str) -> None:
        """Drop the claim once the blob is deleted (or kept): writers waiting on it go on."""
        with self.database.transaction() as db:
            self._lock(db, key)
            db.execute("DELETE FROM blob_claims WHERE key=? AND holder=?", (key, holder))


class LeasedBlobs:
    """The blobs one upload stores, each leased before it is written; ``give_back`` ends the
    leases inside the transaction that commits the rows referring to them, and leaving the
    ``with`` block on an error ends them without a row (the blobs become orphans)."""

    def __init__(self, leases: BlobLeases, blobs: BlobStore) -> None:
        self.leases, self.blobs = leases, blobs
        self.holder = secrets.token_hex(16)
        self.held: dict[str, str] = {}

    def put_file(self, file: BinaryIO, sha256: str) -> str:
        self._lease(sha256)
        return self.blobs.put_file(file, sha256)

    def put(self, data: bytes) -> str:
        return self.put_file(io.BytesIO(data), hashlib.sha256(data).hexdigest())

    def _lease(self, key: str) -> None:
        if key in self.held:
            return
        deadline = time.monotonic() + LEASE_WAIT_S
        while not self.leases.take(key, self.holder):  # a collector is deleting it now
            if time.monotonic() > deadline:
                raise Unavailable(
                    "blob_busy",
                    "the hub is collecting a stored file this upload needs; send it again",
                )
            time.sleep(LEASE_POLL_S)
        self.held[key] = self.holder

    def give_back(self, db: Any) -> None:
        """In the transaction that commits the rows referring to these blobs."""
        self.leases.give_back(db, self.held)

    def __enter__(self) -> LeasedBlobs:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            return
        try:
            self.leases.release(self.held)
        except Exception:  # the database gone: the leases lapse after the grace period
            log.warning("could not end the leases of a failed upload", exc_info=True)
