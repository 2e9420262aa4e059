"""The hub's fork server: child processes (upload workers, dataset decodes) forked from one
server process that imported the hub and pyarrow once.

A forked child starts with a fresh interpreter's state as far as the hub is concerned (none of
the hub's event loop, threads or sockets, as ``spawn`` gives), but in milliseconds instead of
importing everything again (about a second of CPU). The server is started by the first child,
and children of its children use the same server.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.context import ForkServerContext

PRELOAD = ["hub_server.hub", "hub_server.attaching", "pyarrow.parquet"]


def context() -> ForkServerContext:
    forking = multiprocessing.get_context("forkserver")
    forking.set_forkserver_preload(PRELOAD)
    return forking
