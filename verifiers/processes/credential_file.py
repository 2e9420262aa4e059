"""Reading a secret: only from a file its user owns and nobody else can read, and only a
secret strong enough that nobody derives it.

A credential file another local user planted (a 0600 file they own in a shared directory) would
hand them the key; one others can read leaks it; an empty file or a secret of spaces gives keys
anyone derives. Each is refused with what to do instead. Files are opened without following a
link (a link swapped in would point the check at one file and the read at another) and judged
by the descriptor that is read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from verifiers.errors import VFError

MIN_SECRET_CHARS = 16
"""Shorter secrets are guessable (vf-env-server's keys are derived from it; a handshake can be
tried thousands of times a second)."""


class CredentialError(VFError, ValueError):
    """A credential that cannot be trusted; the message says why and what to do."""


def trusted_file(path: Path) -> bool:
    """A configuration file to act on: a regular file (not a link) owned by this user or root,
    which nobody else may write."""
    try:
        info = path.lstat()
    except OSError:
        return False
    return (
        stat.S_ISREG(info.st_mode)
        and info.st_uid in (os.getuid(), 0)
        and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    )


def checked_secret(secret: str, source: str) -> str:
    """``secret`` stripped, refused when it is too short to be one."""
    value = secret.strip()
    if len(value) < MIN_SECRET_CHARS:
        raise CredentialError(
            f"{source} holds {'no secret' if not value else f'a {len(value)}-character secret'}; "
            f"a secret needs at least {MIN_SECRET_CHARS} characters (e.g. python -c "
            "'import secrets; print(secrets.token_urlsafe(32))')"
        )
    return value


def read_credential(path: str | os.PathLike[str]) -> str:
    """The secret in ``path``: a regular file (not a link) owned by this user, which nobody
    else may read or write, holding a strong enough secret."""
    file = Path(path)
    try:
        # O_NONBLOCK: a FIFO opens at once (and is refused below) instead of waiting for a writer
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise CredentialError(f"cannot open {file} without following a link: {exc}") from None
    with os.fdopen(fd, "r") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise CredentialError(f"{file} is not a regular file")
        if info.st_uid != os.geteuid():
            raise CredentialError(
                f"{file} belongs to uid {info.st_uid}, not to you (uid {os.geteuid()}): whoever "
                "made it knows the secret; make your own file (chmod 600)"
            )
        if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise CredentialError(
                f"{file} is open to others (mode {oct(info.st_mode & 0o777)}); chmod 600 it"
            )
        return checked_secret(handle.read(), str(file))
