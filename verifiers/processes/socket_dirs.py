"""Private directories for Unix sockets, where a socket's path fits.

A Unix socket's path is at most 107 bytes on Linux (``sockaddr_un.sun_path`` less its NUL). The
temp dir is where such directories belong, but a deep ``TMPDIR`` (a CI runner's or a test's
per-test directory) leaves no room: binding fails and the server never starts. Then the
directory goes under ``/tmp`` instead; it is 0700 and named for its maker as the temp dir's would
be, so it is as private and as collectable.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import shutil
import tempfile
from pathlib import Path

from verifiers.errors import VFError
from verifiers.processes.leftovers import owned_dir, remove_abandoned

SUN_PATH_MAX = 107
SHORT_PARENT = Path("/tmp")
# what ``owned_dir`` adds after the prefix: a 12-character machine key, ``-``, a pid of up to
# 7 digits, ``.``, mkdtemp's 8 characters, then ``/`` before the socket's own name
_OWNED_SUFFIX = 12 + 1 + 7 + 1 + 8 + 1


class SocketPathError(VFError):
    """No directory short enough for a Unix socket's path."""


def _fits(parent: Path, prefix: str, longest_name: str) -> bool:
    length = len(str(parent).encode()) + 1 + len(prefix) + _OWNED_SUFFIX + len(longest_name)
    return length <= SUN_PATH_MAX


def socket_parent(prefix: str, longest_name: str) -> Path:
    """The temp dir, or ``/tmp`` when a socket named ``longest_name`` in an ``owned_dir(prefix)``
    under the temp dir would be too long to bind."""
    for parent in (Path(tempfile.gettempdir()), SHORT_PARENT):
        if _fits(parent, prefix, longest_name):
            return parent
    raise SocketPathError(f"no directory short enough for a Unix socket named {longest_name!r}")


def socket_dir(prefix: str, longest_name: str) -> Path:
    """A new 0700 directory for sockets named up to ``longest_name``, after removing those a
    killed maker left in the same parent."""
    parent = socket_parent(prefix, longest_name)
    remove_abandoned(parent, prefix)
    return owned_dir(prefix, parent)


# multiprocessing's fork server listens on ``listener-`` and 8 random characters in its temp dir
_FORKSERVER_LISTENER = "listener-" + "x" * 8
_MULTIPROCESSING_PREFIX = "pymp-"


def short_multiprocessing_temp_dir() -> None:
    """Give this process's ``multiprocessing`` a temp dir its fork server can listen in.

    ``multiprocessing.util.get_temp_dir`` makes one under the temp dir on first use and keeps it
    in the process's config; Python before 3.14 never checks that the listener's path fits. Made
    here first when it would not, it is used as that function's own would be (removed at exit).
    """
    config = multiprocessing.current_process()._config  # type: ignore[attr-defined]
    if config.get("tempdir") is not None:
        return
    if _fits(Path(tempfile.gettempdir()), _MULTIPROCESSING_PREFIX, _FORKSERVER_LISTENER):
        return
    made = str(socket_dir(_MULTIPROCESSING_PREFIX, _FORKSERVER_LISTENER))
    config["tempdir"] = made
    multiprocessing.util.Finalize(None, shutil.rmtree, args=(made, True), exitpriority=-100)
