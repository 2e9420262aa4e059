"""A benchmark stops as cleanly on SIGTERM (or a closed terminal's SIGHUP) as on Ctrl-C, and
Ctrl-C as SIGTERM does (within UNWIND_S, even when started with SIGINT ignored, as a
non-interactive shell's background job is).

By default SIGTERM ends Python at once: no ``finally`` block, context manager or ``atexit``
handler runs, so the servers, trainers and temp dirs a benchmark started were left behind (a
TRL trainer at 99% CPU, PostgreSQL, moto and a hub, hundreds of MB in /tmp). Turned into
``SystemExit``, the signal unwinds the benchmark like any error: ``subprocess.run`` kills its
child, ``finally`` blocks stop servers, and ``scratch_dir``'s directories are removed.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

UNWIND_S = 45
"""How long unwinding may take after the signal before the benchmark ends at once (its children
stopped and its scratch dirs removed first): a wait the signal cannot interrupt never ends it."""

_scratch: list[Path] = []


def _stop(signum: int, frame: object) -> None:
    signal.signal(signal.SIGALRM, _give_up)
    signal.alarm(UNWIND_S)
    raise SystemExit(128 + signum)


def _give_up(signum: int, frame: object) -> None:
    sys.stderr.write(f"unwinding took more than {UNWIND_S} s; it hung here:\n")
    faulthandler.dump_traceback(all_threads=True)
    _dump_tasks()
    _stop_children()
    for path in _scratch:
        shutil.rmtree(path, True)
    os._exit(128 + signal.SIGTERM)


def _dump_tasks() -> None:
    """The event loop's tasks and where each waits, when the hang is in an ``asyncio.run``."""
    import asyncio

    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:  # no loop runs in this thread
        return
    for task in tasks:
        task.print_stack(limit=8, file=sys.stderr)


def install() -> None:
    """Make SIGINT, SIGTERM and SIGHUP unwind the benchmark (call first thing in ``main``), and
    at exit stop whatever it started that is still running: a server started in a session of
    its own, or one whose stop was never reached because the signal came while it was
    starting."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop)
    atexit.register(_stop_children)


def _stop_children() -> None:
    import psutil

    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=10)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


def scratch_dir(prefix: str) -> Path:
    """A temp directory removed when the benchmark exits, however it is stopped: after what it
    started is stopped (a child still running would write into it again)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    _scratch.append(path)

    def remove() -> None:
        _stop_children()
        shutil.rmtree(path, True)

    atexit.register(remove)
    return path
