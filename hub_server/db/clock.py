"""The hub's timestamps: UTC, ISO 8601 with a ``Z``, so they sort as text in either database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def now(after: timedelta | None = None) -> str:
    moment = datetime.now(UTC) + (after or timedelta())
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")
