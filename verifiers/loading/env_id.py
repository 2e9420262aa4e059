"""The one grammar of environment ids: ``name``, ``owner/name``, either with ``@version``.

Owners and names are 1-64 characters of letters, digits, ``.``, ``_`` and ``-``, starting with a
letter or digit, compared case-insensitively (stored lowercase, as the hub does); a version is
PEP 440 (or ``latest``, meaning none). ``vf-eval``, ``vf.load_environment``, ``prime`` and the hub
all parse ids here, so an id that works in one works in all of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verifiers.errors import VFError

NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
NAME = re.compile(rf"^{NAME_PATTERN}$")
_ID = re.compile(
    rf"^(?:(?P<owner>{NAME_PATTERN})/)?(?P<name>{NAME_PATTERN})(?:@(?P<version>[^\s/@]+))?$"
)


class EnvIdError(VFError, ValueError):
    """Text that is not an environment id (the message shows the accepted forms)."""


@dataclass(frozen=True)
class EnvId:
    owner: str | None
    name: str
    version: str | None  # None = latest

    @classmethod
    def parse(cls, text: str, *, require_owner: bool = False) -> EnvId:
        match = _ID.match(text.strip())
        forms = (
            "owner/name or owner/name@1.2.3"
            if require_owner
            else "name, owner/name or owner/name@1.2.3"
        )
        if not match or (require_owner and not match["owner"]):
            raise EnvIdError(f"{text!r} is not an environment id; use {forms}")
        version = match["version"]
        if version is not None and version != "latest":
            try:
                Version(version)
            except InvalidVersion:
                raise EnvIdError(
                    f"{text!r}: {version!r} is not a PEP 440 version (e.g. 1.2.3)"
                ) from None
        owner = match["owner"].lower() if match["owner"] else None
        return cls(owner, match["name"].lower(), None if version in (None, "latest") else version)

    @property
    def module_name(self) -> str:
        return self.name.replace("-", "_").replace(".", "_")

    @property
    def distribution(self) -> str:
        """The PEP 503 normalized distribution name (an environment's hub name is its distribution)."""
        return canonicalize_name(self.name)

    def __str__(self) -> str:
        base = f"{self.owner}/{self.name}" if self.owner else self.name
        return f"{base}@{self.version}" if self.version else base
