"""Lock files for ``flock`` that other users cannot take.

Anyone who can open a file or directory, even read-only, can ``flock`` it, so a lock on a
readable directory (a virtualenv, a run's output dir) lets any local user hold it for as long as
they like. A lock file that only its owner (and, under a group-shared umask, the group) can open
leaves that to those who could write there anyway. Opened for writing, as NFS needs to carry an
exclusive lock across hosts; never through a link; closed on exec.
"""

from __future__ import annotations

import os
from pathlib import Path


def open_lock_file(path: Path, mode: int = 0o600) -> int:
    """The descriptor of ``path`` (made with ``mode`` under the umask when missing), to flock."""
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def still_named(fd: int, path: Path) -> bool:
    """Whether the file open at ``fd`` is the one at ``path`` (not removed, nor replaced): a
    lock taken on a file someone removed or replaced meanwhile locks nothing anyone else sees."""
    try:
        named = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)
