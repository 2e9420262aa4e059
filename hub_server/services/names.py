"""The grammar of what the hub names and stores: owner and environment names, PEP 440 versions,
and free text.

Every check here is a ``fullmatch`` or a bound, never a prefix test: ``$`` alone would let
``alice\\n`` through as a name.
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from hub_server.db.engine import unstorable
from hub_server.errors import HubError

# verifiers.loading.env_id's grammar, stored lowercase
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
MAX_VERSION_LENGTH = 64
MAX_VERSION_NUMBER = 2**64 - 1  # installers keep each number of a version in 64 bits (uv does)


def is_name(value: str) -> bool:
    return NAME.fullmatch(value) is not None


def check_name(value: str, what: str) -> None:
    if not is_name(value):
        raise HubError(
            400,
            "invalid_name",
            f"{what} name {value!r} must be lowercase letters, digits, '.', '_' or '-' (max 64)",
        )


def normalize_version(version: str) -> str:
    """The PEP 440 spelling of ``version``, which must also be one installers can hold: at
    most 64 characters, each number in 64 bits (a 3,000-digit release segment parses in
    Python and nowhere else)."""
    try:
        parsed = Version(version)
    except InvalidVersion as exc:
        raise HubError(400, "invalid_version", f"{version!r} is not a PEP 440 version") from exc
    labelled = (parsed.pre[1] if parsed.pre else None, parsed.post, parsed.dev)
    numbers = [parsed.epoch, *parsed.release, *(n for n in labelled if n is not None)]
    if len(version) > MAX_VERSION_LENGTH or max(numbers) > MAX_VERSION_NUMBER:
        raise HubError(
            400,
            "invalid_version",
            f"{version[:40]!r}... is too long a version: at most {MAX_VERSION_LENGTH} "
            "characters, each number below 2**64",
        )
    return str(parsed)


def check_text(value: str | None, what: str) -> None:
    """Text the hub stores must be storable on every backend (``db.engine.unstorable``): refused
    here with the field's name; the storage layer refuses whatever a route did not check."""
    bad = unstorable(value) if value is not None else None
    if bad is not None:
        raise HubError(
            400,
            "invalid_text",
            f"{what} contains {bad}, which the hub does not store; remove it",
        )
