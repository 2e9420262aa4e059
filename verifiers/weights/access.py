"""Who may change the weights a server serves, and from where.

The weight routes (``/v1/weights/load``, ``/v1/weights/broadcast/init`` and ``/update``) answer
only requests that carry the secret the trainer created at launch, in the ``X-VF-Weights-Secret``
header. The trainer hands it to the server privately (the ``VF_WEIGHTS_SECRET`` environment
variable of the server process, or a 0600 file given with ``--weights-secret-file``), never on a
command line. Without a secret the routes are off. ``/v1/weights/load`` reads only directories
under the ``--trusted-weights-dir`` roots (``VF_TRUSTED_WEIGHTS_DIRS``), after resolving links,
and in them only regular files that lie under a root themselves, judged by the file each one
opened (:func:`opened`): a link inside a trusted directory to a file elsewhere, or a file swapped
for one between the check and the read, is refused.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from verifiers.asgi.json_api import APIError
from verifiers.processes.credential_file import checked_secret, read_credential
from verifiers.processes.server import SECRET_ENV, TRUSTED_ENV

HEADER = "x-vf-weights-secret"
VLLM_API_KEY_ENV = "VLLM_API_KEY"  # vLLM's own --api-key, read from its environment


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def read_secret_file(path: str | os.PathLike[str]) -> str:
    """The secret in ``path`` (``verifiers.processes.credential_file``: this user's own private
    file, a strong enough secret; refused otherwise)."""
    return read_credential(path)


class WeightAccess:
    def __init__(self, secret: str | None, trusted: list[Path]) -> None:
        self.secret = secret
        self.trusted = [p.resolve() for p in trusted]

    @classmethod
    def configure(
        cls,
        secret_file: str | None = None,
        trusted_dirs: list[str] | None = None,
        secret: str | None = None,
    ) -> WeightAccess:
        """The access vf-serve's settings describe (a secret file wins over ``secret``)."""
        if secret_file:
            secret = read_secret_file(secret_file)
        elif secret:
            secret = checked_secret(secret, f"${SECRET_ENV}")
        else:
            secret = None
        return cls(secret, [Path(d) for d in trusted_dirs or []])

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> WeightAccess:
        """In a vLLM server, whose command line is vLLM's: what vf-rl put in its environment
        (vf-serve reads the same variables through its settings, ``verifiers.cli.serve``)."""
        dirs = [d for d in environ.get(TRUSTED_ENV, "").split(os.pathsep) if d]
        return cls.configure(None, dirs, environ.get(SECRET_ENV))

    @property
    def enabled(self) -> bool:
        return self.secret is not None

    def check(self, headers: Mapping[str, str]) -> None:
        """Raise a 401/403 APIError unless the request carries the secret."""
        if self.secret is None:
            raise APIError(
                403,
                "weight updates are off: start the server with a weights secret "
                f"({SECRET_ENV} or --weights-secret-file), as vf-rl does",
                kind="permission_error",
            )
        given = headers.get(HEADER, "")
        if not hmac.compare_digest(given.encode(), self.secret.encode()):
            raise APIError(401, "missing or wrong weights secret", kind="authentication_error")

    def check_path(self, path: str) -> Path:
        """``path`` resolved, if it lies under a trusted root; else a 403 APIError (a 400 for a
        path no file can have)."""
        try:
            resolved = Path(path).resolve()
        except (ValueError, OSError) as exc:  # a NUL byte, a link loop
            raise APIError(400, f"{path!r} is not a usable path: {exc}", param="path") from exc
        if not is_under(resolved, self.trusted):
            raise APIError(
                403,
                f"{path} is not under a trusted weights directory "
                f"({', '.join(map(str, self.trusted)) or 'none configured: --trusted-weights-dir'})",
                kind="permission_error",
                param="path",
            )
        return resolved


def is_under(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


@contextmanager
def opened(path: Path, trusted: Sequence[Path] | None) -> Iterator[str]:
    """A name to read the file at ``path`` by. Without ``trusted`` roots, ``path`` itself.
    With them, ``/proc/self/fd/N`` of a descriptor opened here, once the file it opened is known
    to be a regular file that lies under a root: its real path (every link resolved) is under
    one and is that very file (same device and inode), so a link to a file elsewhere is refused,
    and so is one swapped in between this check and the read (PermissionError; without /proc
    the name is the checked real path, which a swap after the check could still change).
    Non-blocking: a FIFO planted in its place cannot hang the server (ValueError)."""
    if trusted is None:
        yield str(path)
        return
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            raise ValueError(f"{path} is not a regular file")
        real = Path(os.path.realpath(path))
        try:
            there = os.stat(real)
        except OSError:
            there = None
        same = there is not None and (there.st_dev, there.st_ino) == (found.st_dev, found.st_ino)
        if not (same and is_under(real, [Path(r).resolve() for r in trusted])):
            raise PermissionError(
                f"{path} does not open a file under a trusted weights directory (it leads to "
                f"{real})"
            )
        proc = f"/proc/self/fd/{fd}"
        yield proc if os.path.exists(proc) else str(real)
    finally:
        os.close(fd)
