"""Who may change the weights a server serves, and from where.

The weight routes (``/v1/weights/load``, ``/v1/weights/broadcast/init`` and ``/update``) answer
only requests that carry the secret the trainer created at launch, in the ``X-VF-Weights-Secret``
header. The trainer hands it to the server privately (the ``VF_WEIGHTS_SECRET`` environment
variable of the server process, or a 0600 file given with ``--weights-secret-file``), never on a
command line. Without a secret the routes are off. ``/v1/weights/load`` reads only directories
under the ``--trusted-weights-dir`` roots (``VF_TRUSTED_WEIGHTS_DIRS``), after resolving links.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from verifiers.asgi.json_api import APIError

SECRET_ENV = "VF_WEIGHTS_SECRET"
TRUSTED_ENV = "VF_TRUSTED_WEIGHTS_DIRS"
HEADER = "x-vf-weights-secret"


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def read_secret_file(path: str | os.PathLike[str]) -> str:
    """The secret in ``path``, which only its owner may read (the file is refused otherwise)."""
    file = Path(path)
    mode = file.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise PermissionError(
            f"{file} is readable by others (mode {oct(mode & 0o777)}); chmod 600 it"
        )
    secret = file.read_text().strip()
    if not secret:
        raise ValueError(f"{file} is empty")
    return secret


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
        secret = read_secret_file(secret_file) if secret_file else secret or None
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
        """``path`` resolved, if it lies under a trusted root; else a 403 APIError."""
        resolved = Path(path).resolve()
        if not any(resolved == root or root in resolved.parents for root in self.trusted):
            raise APIError(
                403,
                f"{path} is not under a trusted weights directory "
                f"({', '.join(map(str, self.trusted)) or 'none configured: --trusted-weights-dir'})",
                kind="permission_error",
                param="path",
            )
        return resolved
