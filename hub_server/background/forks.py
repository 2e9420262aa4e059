"""The hub's fork server: child processes (upload workers, dataset decodes) forked from one
server process that imported the hub and pyarrow once.

A forked child starts with a fresh interpreter's state as far as the hub is concerned (none of
the hub's event loop, threads or sockets, as ``spawn`` gives), but in milliseconds instead of
importing everything again (about a second of CPU). The server is started by the first child,
and children of its children use the same server.
"""

from __future__ import annotations

import multiprocessing
import sys
from multiprocessing.context import ForkServerContext, SpawnContext

from verifiers.processes.socket_dirs import short_multiprocessing_temp_dir

# hub_client.cli: ``prime hub serve``'s main module, which each child re-runs as its main (as
# spawn would), and hub_server.cli, which it hands the command to; with their imports done here,
# that costs nothing.
PRELOAD = [
    "hub_client.cli",
    "hub_server.cli",
    "hub_server.services.hub",
    "hub_server.services.attaching",
    "pyarrow.parquet",
]


def context() -> ForkServerContext | SpawnContext:
    if sys.version_info < (3, 11, 1):  # its fork server listened where any local user could send
        return multiprocessing.get_context("spawn")  # it pickles (CVE-2022-42919)
    short_multiprocessing_temp_dir()  # its listener's path must fit a Unix socket's
    forking = multiprocessing.get_context("forkserver")
    forking.set_forkserver_preload(PRELOAD)
    return forking
