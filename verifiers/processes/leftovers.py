"""Scratch directories named after the process that made them (``PREFIX``, a key for its
machine, ``-``, its pid, ``.``, mkdtemp's 8 characters), so that a later process can remove what
a killed one left behind: SIGKILL and the OOM killer run no cleanup.

The machine key hashes this boot's ``boot_id`` with the pid namespace: a pid is judged only by a
process that shares its process table. Another host on a shared filesystem (NFS checkpoints, a
hub data dir) or a container sharing ``/tmp`` has pids of its own, and its directories are left
alone (so are this machine's from before a reboot: kept, never wrongly removed).

Only directories that nobody else could have put there are judged: this user's own, never a link,
and only in a parent that others cannot rename entries in (not writable by others, or sticky
like ``/tmp``): in a shared directory without the sticky bit, another user could rename a
victim's directory to a leftover's name.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import re
import shutil
import signal
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

# the maker's machine key and pid (at most 4194304), then mkdtemp's 8 random characters
_MAKER_AND_RANDOM = r"(?P<machine>[0-9a-f]{12})-(?P<pid>[0-9]{1,7})\.[a-z0-9_]{8}"
# what comes before the maker in a hidden staging directory (``staging_dir``): ``.NAME-``
STAGING = r"\..+-"


# (maker pid, path, device, inode) of every directory ``owned_dir`` made: what is still there,
# unchanged, when its maker exits is removed then
_made: list[tuple[int, Path, int, int]] = []
_STOPS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def owned_dir(prefix: str, parent: Path | None = None) -> Path:
    """A new 0700 directory under ``parent`` (the temp dir by default) named for this process,
    removed when this process exits if its owner has not removed or renamed it by then: a
    signal turned into an exception (Ctrl-C, a benchmark's SIGTERM) may land between the
    directory's making and its owner's cleanup. Stop signals are held while it is made and
    recorded, so no such exception lands between those two either."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
    try:
        path = Path(tempfile.mkdtemp(prefix=f"{prefix}{machine_key()}-{os.getpid()}.", dir=parent))
        info = path.lstat()
        _made.append((os.getpid(), path, info.st_dev, info.st_ino))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    return path


@atexit.register
def _remove_made_here() -> None:
    """This process's directories still in place (a forked child's exit leaves its parent's;
    a name now holding something else, such as a link or the tmpfs a sandbox mounted there,
    is left alone)."""
    for pid, path, device, inode in _made:
        if pid != os.getpid():
            continue
        try:
            info = path.lstat()
        except OSError:
            continue
        if (info.st_dev, info.st_ino) == (device, inode) and stat.S_ISDIR(info.st_mode):
            shutil.rmtree(path, ignore_errors=True)


def staging_dir(name: str, parent: Path) -> Path:
    """A hidden directory beside where ``name`` will land, to build it in and rename it into
    place (so a reader sees all of it or none); ``remove_abandoned(parent, STAGING)`` removes
    those a killed process left."""
    return owned_dir(f".{name}-", parent)


def abandoned(
    parent: Path, prefix: str, *, any_maker: bool = False, this_process: bool = False
) -> list[Path]:
    """The directories in ``parent`` that ``owned_dir`` made for a process of this machine that
    is gone: ``prefix`` is a regular expression for the part before the maker. Only this user's
    real directories, and none where others could have renamed one (see the module docstring).
    A parent that cannot be read yields nothing: cleaning up never fails the caller.

    ``any_maker``: the caller holds a lock that every maker held while alive (a run directory's),
    so each such directory is abandoned, whatever machine or boot made it.

    ``this_process``: only the directories this process made, which it abandons as it exits
    (a stop that lands between a directory's making and its owner's cleanup); other makers'
    are left to the next start's cleanup."""
    pattern = re.compile(prefix + _MAKER_AND_RANDOM)
    try:
        if not _others_cannot_rename_in(parent.stat()):
            return []
        entries = list(parent.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        named = pattern.fullmatch(entry.name)
        if named is None or not (any_maker or named["machine"] == machine_key()):
            continue
        try:
            info = entry.lstat()
        except OSError:
            continue
        pid = int(named["pid"])
        if this_process:
            if _ours(info) and pid == os.getpid():
                found.append(entry)
        elif _ours(info) and (any_maker or not running(pid)):
            found.append(entry)
    return found


def remove_abandoned(parent: Path, prefix: str, *, any_maker: bool = False) -> list[Path]:
    """Remove what ``abandoned`` finds; returns it."""
    gone = abandoned(parent, prefix, any_maker=any_maker)
    for entry in gone:
        shutil.rmtree(entry, ignore_errors=True)
    return gone


@contextmanager
def pinned(entry: Path) -> Iterator[int | None]:
    """``entry`` opened without following a link (None if it is not our real directory any
    more): work through the descriptor (``dir_fd=``, ``/proc/self/fd/N``), so the name being
    swapped for a link after ``abandoned`` judged it changes nothing."""
    try:
        fd = os.open(entry, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        yield None
        return
    try:
        yield fd if _ours(os.fstat(fd)) else None
    finally:
        os.close(fd)


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@cache
def machine_key() -> str:
    """This boot of this machine and this pid namespace, as 12 hex characters."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:  # no /proc: this process's own name for the machine
        boot, namespace = os.uname().nodename, 0
    return hashlib.sha256(f"{boot}:{namespace}".encode()).hexdigest()[:12]


def _ours(info: os.stat_result) -> bool:
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid()


def _others_cannot_rename_in(info: os.stat_result) -> bool:
    shared = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return not shared or bool(info.st_mode & stat.S_ISVTX)
