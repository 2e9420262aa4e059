"""Collecting orphan blobs: those no committed row refers to, older than a grace period.

A push stores its blobs before the transaction that makes its version visible, so a hub
killed between the two (or a push refused at its commit) leaves blobs nobody refers to. They
are never served (every download goes through a row), and this removes them. It is safe
beside pushes in flight, in this process or another: the blobs are listed *before* the rows
are read, and only those older than the grace period are candidates; a push that stores (or
re-stores) a blob makes it young, so a blob whose row commits after the read was young at the
listing. The store re-checks the age as it removes (``discard_if_older``).
"""

from __future__ import annotations

import logging
import threading
import time

from hub_server.db.blob_references import referenced_blobs
from hub_server.services.hub import Hub

log = logging.getLogger(__name__)


def collect_orphan_blobs(hub: Hub, grace_s: float | None = None) -> list[str]:
    """Remove the blobs no row refers to and nobody has written for ``grace_s`` seconds
    (default: the hub's ``blob_grace``); the keys removed."""
    grace = hub.settings.blob_grace if grace_s is None else grace_s
    cutoff = time.time() - grace
    candidates = hub.blobs.keys_older_than(cutoff)  # first: see the module's docstring
    if not candidates:
        return []
    referenced = referenced_blobs(hub.database)
    removed = [
        key
        for key in candidates
        if key not in referenced and hub.blobs.discard_if_older(key, cutoff)
    ]
    if removed:
        log.info("collected %d orphan blob(s)", len(removed))
    return removed


def collect_in_background(hub: Hub) -> threading.Thread:
    """One collection at the hub's start, in a thread, so a large store never delays serving;
    a failure (the store unreachable) is logged, and the next start collects."""

    def run() -> None:
        try:
            collect_orphan_blobs(hub)
        except Exception:
            log.exception("collecting orphan blobs failed; the next start tries again")

    thread = threading.Thread(target=run, name="blob-collector", daemon=True)
    thread.start()
    return thread
