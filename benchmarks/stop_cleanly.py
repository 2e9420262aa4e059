"""A benchmark stops as cleanly on SIGTERM (or a closed terminal's SIGHUP) as on Ctrl-C.

By default SIGTERM ends Python at once: no ``finally`` block, context manager or ``atexit``
handler runs, so the servers, trainers and temp dirs a benchmark started were left behind (a
TRL trainer at 99% CPU, PostgreSQL, moto and a hub, hundreds of MB in /tmp). Turned into
``SystemExit``, the signal unwinds the benchmark like any error: ``subprocess.run`` kills its
child, ``finally`` blocks stop servers, and ``scratch_dir``'s directories are removed.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import signal
import tempfile
from pathlib import Path


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def install() -> None:
    """Make SIGTERM and SIGHUP unwind the benchmark (call first thing in ``main``), and at exit
    stop whatever it started that is still running: a server started in a session of its own,
    or one whose stop was never reached because the signal came while it was starting."""
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGHUP, _stop)
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
    """A temp directory removed when the benchmark exits, however it is stopped."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, True)
    return path
