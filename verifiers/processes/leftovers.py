"""Scratch directories named after the process that made them (``PREFIX``, its pid namespace,
``-``, its pid, ``.``, mkdtemp's 8 characters), so that a later process can remove what a killed
one left behind: SIGKILL and the OOM killer run no cleanup. Only directories of this pid
namespace are judged: a container that shares ``/tmp`` has pids of its own.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

# the maker's pid namespace and pid (at most 4194304), then mkdtemp's 8 random characters
_MAKER_AND_RANDOM = r"(?P<namespace>[0-9]+)-(?P<pid>[0-9]{1,7})\.[a-z0-9_]{8}"


def owned_dir(prefix: str, parent: Path | None = None) -> Path:
    """A new 0700 directory under ``parent`` (the temp dir by default) named for this process."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{_pid_namespace()}-{os.getpid()}.", dir=parent))


def remove_abandoned(parent: Path, prefix: str) -> list[Path]:
    """Remove the directories in ``parent`` that ``owned_dir`` made for a process that is gone:
    ``prefix`` is a regular expression for the part before the pid. Only this user's real
    directories are touched (never a link, never another user's). Returns what was removed."""
    pattern, namespace = re.compile(prefix + _MAKER_AND_RANDOM), str(_pid_namespace())
    removed = []
    for entry in parent.iterdir() if parent.is_dir() else ():
        found = pattern.fullmatch(entry.name)
        if found is None or found["namespace"] != namespace:
            continue
        if entry.is_symlink() or not entry.is_dir():
            continue
        if entry.stat().st_uid == os.getuid() and not running(int(found["pid"])):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _pid_namespace() -> int:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:  # no /proc: one namespace as far as we can tell
        return 0
