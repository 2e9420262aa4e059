"""Collecting orphan blobs (those no committed row refers to, older than a grace period), at
the hub's start and then every ``blob_collect_interval`` seconds while it runs; and the leases
every upload takes on the blobs it stores (``hub_server.db.blob_leases.LeasedBlobs``), which make the collection safe.

A push stores its blobs before the transaction that makes its version visible, so a hub killed
between the two (or a push refused at its commit) leaves blobs nobody refers to, as does deleting
a version, an environment, an eval or a dataset. They are never served (every download goes
through a row), and this removes them from the store (the files directory or the S3 bucket).

It is safe beside uploads in flight, in this process or another, on either store: an upload
leases each blob's key before writing it and hands the lease back in the transaction that
commits its row; the collector deletes a blob only after committing a claim on it, in one
transaction that found no live lease and no row referring to it (``hub_server.db.blob_leases``).
A write can therefore never land between the collector's checks and its delete: an upload that
asks for a lease while a claim stands waits for the delete to be done, then writes the bytes
again. The age (the blob's last write, older than the grace period) is checked as well, so a
hub process of a release before leases, during a rolling upgrade, is still covered as before.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from functools import partial

from hub_server.db.blob_references import referenced_blobs
from hub_server.services import official_evals, staging
from hub_server.services.hub import Hub

log = logging.getLogger(__name__)


def collect_orphan_blobs(
    hub: Hub,
    grace_s: float | None = None,
    on_claimed: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> list[str]:
    """Remove the blobs no row refers to and nobody has written or leased for ``grace_s``
    seconds (default: the hub's ``blob_grace``); the keys removed. Tests force interleavings
    with ``on_claimed(key)``, which runs between a claim and its delete, and ``clock``, which
    the blobs' ages are judged by (a clock ahead makes every blob old; leases are judged by the
    database's side, in real time)."""
    grace = hub.settings.blob_grace if grace_s is None else grace_s
    cutoff = clock() - grace
    holder = secrets.token_hex(16)
    removed = []
    candidates = hub.blobs.keys_older_than(cutoff)
    referenced = referenced_blobs(hub.database) if candidates else set()  # one scan, then
    for key in (k for k in candidates if k not in referenced):  # a claim re-checks each
        if not hub.leases.claim(key, holder, grace):
            continue
        try:
            if on_claimed is not None:
                on_claimed(key)
            # under the key's lock, with the claim read again: one that stalled past the
            # claim's TTL, taken over by a push meanwhile, deletes nothing
            if hub.leases.delete_claimed(
                key, holder, partial(hub.blobs.discard_if_older, key, cutoff)
            ):
                removed.append(key)
        finally:
            hub.leases.unclaim(key, holder)
    if removed:
        log.info("collected %d orphan blob(s)", len(removed))
    return removed


def collect_periodically(hub: Hub, stop: threading.Event) -> threading.Thread:
    """Collect at the hub's start, in a thread (a large store never delays serving), then every
    ``blob_collect_interval`` seconds (0: only at the start) until ``stop`` is set: orphan
    blobs, and the staged bytes of expired pushes and evals (a long-running hub keeps none of
    them until its next start). A failure (the store unreachable) is logged and the next round
    tries again."""
    interval = hub.settings.blob_collect_interval

    def run() -> None:
        while not stop.is_set():
            for collect in (collect_orphan_blobs, staging.collect, official_evals.collect):
                try:
                    collect(hub)
                except Exception:
                    log.exception("%s failed; the next round tries again", collect.__name__)
            if interval <= 0 or stop.wait(interval):
                return

    thread = threading.Thread(target=run, name="blob-collector", daemon=True)
    thread.start()
    return thread
