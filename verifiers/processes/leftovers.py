"""Scratch directories named after the process that made them (``PREFIX``, its pid namespace,
``-``, its pid, ``.``, mkdtemp's 8 characters), so that a later process can remove what a killed
one left behind: SIGKILL and the OOM killer run no cleanup. Only directories of this pid
namespace are judged: a container that shares ``/tmp`` has pids of its own.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

# the maker's pid namespace and pid (at most 4194304), then mkdtemp's 8 random characters
_MAKER_AND_RANDOM = r"(?P<namespace>[0-9]+)-(?P<pid>[0-9]{1,7})\.[a-z0-9_]{8}"


def owned_dir(prefix: str, parent: Path | None = None) -> Path:
    """A new 0700 directory under ``parent`` (the temp dir by default) named for this process."""
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{_pid_namespace()}-{os.getpid()}.", dir=parent))


def abandoned(parent: Path, prefix: str) -> list[Path]:
    """The directories in ``parent`` that ``owned_dir`` made for a process of this pid namespace
    that is gone: ``prefix`` is a regular expression for the part before the maker. Only this
    user's real directories (never a link, never another user's: ``/tmp`` is everyone's)."""
    pattern, namespace = re.compile(prefix + _MAKER_AND_RANDOM), str(_pid_namespace())
    found = []
    for entry in parent.iterdir() if parent.is_dir() else ():
        named = pattern.fullmatch(entry.name)
        if named is None or named["namespace"] != namespace:
            continue
        try:
            info = entry.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
            if not running(int(named["pid"])):
                found.append(entry)
    return found


def remove_abandoned(parent: Path, prefix: str) -> list[Path]:
    """Remove what ``abandoned`` finds; returns it."""
    gone = abandoned(parent, prefix)
    for entry in gone:
        shutil.rmtree(entry, ignore_errors=True)
    return gone


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
