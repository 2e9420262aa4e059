"""The grammar of names and versions on the hub (PEP 503 names, PEP 440 versions)."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from hub_server.errors import HubError

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")  # verifiers.loading.env_id's grammar, stored lowercase


def check_name(value: str, what: str) -> None:
    if not NAME.match(value):
        raise HubError(
            400,
            "invalid_name",
            f"{what} name {value!r} must be lowercase letters, digits, '.', '_' or '-' (max 64)",
        )


def normalize_version(version: str) -> str:
    try:
        return str(Version(version))
    except InvalidVersion as exc:
        raise HubError(400, "invalid_version", f"{version!r} is not a PEP 440 version") from exc
