"""Which hub owner an installed environment came from, so ``owner/name`` only loads that owner's.

``prime env install`` records each distribution it installs (owner, name, version, hub) in
``<prefix>/share/verifiers/hub-installs.json`` of the Python it installed into; ``prime env
uninstall`` removes the entry; ``load_environment("owner/name")`` checks it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name


def records_path(prefix: str | None = None) -> Path:
    return Path(prefix or sys.prefix) / "share" / "verifiers" / "hub-installs.json"


def read_records(prefix: str | None = None) -> dict[str, dict[str, Any]]:
    try:
        data = json.loads(records_path(prefix).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_record(
    distribution: str, record: dict[str, Any] | None, prefix: str | None = None
) -> None:
    """Set (or, with None, remove) one distribution's record, atomically."""
    path = records_path(prefix)
    records = read_records(prefix)
    key = canonicalize_name(distribution)
    if record is None:
        records.pop(key, None)
    else:
        records[key] = record
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(records, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def installed_owner(distribution: str) -> str | None:
    record = read_records().get(canonicalize_name(distribution))
    return record.get("owner") if record else None
