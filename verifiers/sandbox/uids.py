"""Sandbox uids (when the host runs as root): one per sandbox, never shared, never anyone else's.

The range sits above every range a Linux host hands out on its own: regular users
(``UID_MIN``-``UID_MAX``), the subordinate uids of user namespaces (``/etc/subuid`` and
``/etc/subgid``, allocated from ``SUB_UID_MIN``-``SUB_UID_MAX``, 100000-600100000 by default:
a sandbox uid there would be some user's container root), systemd's dynamic users and
nspawn's ranges (below 1879048192). Any uid that is still in use there or in ``/etc/passwd``
is skipped. A claim is an exclusive lock on a per-uid file, kept while the sandbox lives and
released by the kernel if the process dies, so two processes never hand out the same uid. A
claim released removes its file (locked still, so no one holds it meanwhile): otherwise every
uid ever handed out left one behind (~25,000 of them in ``/run``, where memory holds them). A
lock is a claim only while its file is still the one at the uid's name: a process that opened
the file before its holder removed it locks a file no one else can see, and moves on. A holder
that died (or released before claims removed their files) left its file: a process's first
claim sweeps those (``sweep_stale``), each removed as a release removes it, locked and still the
file at its name; a file that is held, another user's, or not a plain file is left alone.

A claim is only ever this user's own plain file, in a directory only this user (or root) may
rename entries of: another user may own a file in a shared sticky directory, and remove it while
a sandbox's claim holds it, so that the next claim takes the same uid (an outside attack's
file, planted at the name a claim would take, gave two sandboxes one uid). Such a file is a uid
in use, and a lock directory another user owns, or anyone may change without the sticky bit, is
refused.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import stat
from functools import cache
from pathlib import Path

from verifiers.processes.lock_file import open_lock_file, still_named
from verifiers.processes.own_dir import foreign_above_problem
from verifiers.sandbox.base import SandboxUnavailableError

UID_BASE, UID_COUNT = 1_900_000_000, 65_536
UID_LOCK_DIR = Path(os.environ.get("VF_SANDBOX_UID_DIR", "/run/verifiers-sandbox-uids"))
_LOGIN_DEFS = Path("/etc/login.defs")
SUBORDINATE_FILES = ("/etc/subuid", "/etc/subgid")
_DEFAULT_SUBORDINATE = (100_000, 600_100_000)  # shadow-utils' SUB_UID_MIN/MAX defaults
_swept: set[Path] = set()  # the lock directories this process has swept


@cache
def taken_ranges() -> tuple[tuple[int, int], ...]:
    """Inclusive uid ranges the host has (or will) hand out: subordinate ranges listed or
    allocatable, and every user and group id on the system."""
    ranges = [_allocatable()]
    for table in SUBORDINATE_FILES:
        for line in _lines(table):
            parts = line.split(":")
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                start, count = int(parts[1]), int(parts[2])
                ranges.append((start, start + count - 1))
    for table in ("/etc/passwd", "/etc/group"):
        for line in _lines(table):
            parts = line.split(":")
            if len(parts) > 2 and parts[2].isdigit():
                ranges.append((int(parts[2]), int(parts[2])))
    return tuple(ranges)


def _allocatable() -> tuple[int, int]:
    values = {}
    for line in _lines(str(_LOGIN_DEFS)):
        key, _, value = line.partition(" ")
        if key in ("SUB_UID_MIN", "SUB_UID_MAX", "SUB_GID_MIN", "SUB_GID_MAX"):
            value = value.strip()
            if value.isdigit():
                values[key] = int(value)
    low = min(
        values.get("SUB_UID_MIN", _DEFAULT_SUBORDINATE[0]),
        values.get("SUB_GID_MIN", _DEFAULT_SUBORDINATE[0]),
    )
    high = max(
        values.get("SUB_UID_MAX", _DEFAULT_SUBORDINATE[1]),
        values.get("SUB_GID_MAX", _DEFAULT_SUBORDINATE[1]),
    )
    return low, high


def _lines(path: str) -> list[str]:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return []
    return [line.split("#", 1)[0].replace("\t", " ").strip() for line in text.splitlines()]


def is_free(uid: int) -> bool:
    return not any(low <= uid <= high for low, high in taken_ranges())


class UidClaim:
    """A sandbox uid no other sandbox on this machine holds and no user or container owns."""

    def __init__(self) -> None:
        UID_LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        if UID_LOCK_DIR not in _swept:
            problem = lock_dir_problem(UID_LOCK_DIR)
            if problem:
                raise SandboxUnavailableError(f"sandbox uid locks ({UID_LOCK_DIR}): {problem}")
            _swept.add(UID_LOCK_DIR)
            sweep_stale(UID_LOCK_DIR)
        start = random.randrange(UID_COUNT)
        for offset in range(UID_COUNT):
            uid = UID_BASE + (start + offset) % UID_COUNT
            if not is_free(uid):
                continue
            fd = _lock(UID_LOCK_DIR / str(uid))
            if fd is None:
                continue
            self.uid = uid
            self._fd: int | None = fd
            return
        raise SandboxUnavailableError(
            f"all {UID_COUNT} sandbox uids from {UID_BASE} are in use or belong to someone "
            "(/etc/subuid, /etc/passwd): destroy sandboxes first"
        )

    def release(self) -> None:
        if self._fd is not None:
            try:
                os.unlink(UID_LOCK_DIR / str(self.uid))  # before the lock goes: see the module
            except FileNotFoundError:
                pass
            os.close(self._fd)
            self._fd = None


def lock_dir_problem(directory: Path) -> str | None:
    """Why ``directory`` cannot hold uid claims: whoever may rename its entries (its owner, or
    anyone where it is writable without the sticky bit, or the owner of a directory above) may
    remove a held claim's file, and the next claim takes that uid too."""
    problem = foreign_above_problem(directory)
    if problem:
        return problem
    info = directory.lstat()
    if not stat.S_ISDIR(info.st_mode):
        return "not a directory (a link or a file)"
    if info.st_uid not in (os.geteuid(), 0):
        return f"belongs to uid {info.st_uid}, who could remove the claims' files"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not info.st_mode & stat.S_ISVTX:
        return f"others may remove its files (mode {oct(info.st_mode & 0o7777)}, no sticky bit)"
    return None


def _lock(path: Path) -> int | None:
    """A descriptor holding ``path``'s exclusive lock, or ``None`` when someone holds it (or
    removed the file that was opened: it is then no claim), or when the file is not this user's
    own plain file (its owner may remove it while the claim holds it)."""
    try:
        fd = open_lock_file(path)
    except OSError as exc:  # a link (O_NOFOLLOW) or a directory at the name: no claim there
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            return None
        raise
    try:
        held = os.fstat(fd)
        if stat.S_ISREG(held.st_mode) and held.st_uid == os.geteuid():
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if still_named(fd, path):
                return fd
    except BlockingIOError:
        pass
    os.close(fd)
    return None


def sweep_stale(directory: Path) -> int:
    """Remove the lock files in ``directory`` no claim holds (their holder died, or released
    before releases removed them), as a release does: each locked first and removed only while
    it is still the file at its name, so a process that opened it meanwhile holds no claim (it
    checks the name). Only a uid's plain file of this user's is touched: one held, another
    user's, a link or anything else stays. Returns how many were removed."""
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.isdigit() or not UID_BASE <= int(entry.name) < UID_BASE + UID_COUNT:
            continue
        path = directory / entry.name
        try:
            found = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(found.st_mode) or found.st_uid != os.geteuid():
            continue
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)  # never made anew
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = os.fstat(fd)
            if still_named(fd, path) and held.st_uid == os.geteuid():
                os.unlink(path)  # before the lock goes, as a release
                removed += 1
        except OSError:  # held (BlockingIOError), or gone meanwhile
            pass
        finally:
            os.close(fd)
    return removed
