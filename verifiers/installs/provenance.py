"""Which hub owner an installed environment came from, so ``owner/name`` only loads that owner's.

``prime env install`` records each distribution it installs (owner, name, version, hub) in
``<prefix>/share/verifiers/hub-installs.json`` of the Python it installed into; ``prime env
uninstall`` removes the entry; ``load_environment("owner/name")`` checks it.

The record also keeps two sources of one name apart: ``prime env install`` refuses to replace
a distribution installed locally (``vf-install``, pip), and ``vf-install`` one installed from
the hub, each naming what is there and how to remove it (a replaced local install was lost
silently, and the hub's uninstall then left nothing).
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


_LOCAL_PROBE = """
import json, sys
from importlib import metadata
try:
    dist = metadata.distribution(sys.argv[1])
except metadata.PackageNotFoundError:
    print("null")
else:
    print(json.dumps({"version": dist.version, "direct_url": dist.read_text("direct_url.json")}))
"""


def local_install(distribution: str, python: str | None = None) -> str | None:
    """How ``distribution`` is installed in ``python`` when it is there but not from the hub
    (``vf-install``, pip): a phrase for a message, e.g. ``0.1.0, editable from /src/x``."""
    prefix = None
    if python is not None and python != sys.executable:
        from verifiers.installs.interpreter import ask, prefix_of

        answer = ask(python, _LOCAL_PROBE, distribution)
        prefix = prefix_of(python)
        try:
            found = json.loads(answer.stdout or "null")
        except ValueError:
            return None
    else:
        from importlib import metadata

        try:
            dist = metadata.distribution(distribution)
        except metadata.PackageNotFoundError:
            return None
        found = {"version": dist.version, "direct_url": dist.read_text("direct_url.json")}
    if not found or canonicalize_name(distribution) in read_records(prefix):
        return None
    try:
        direct = json.loads(found.get("direct_url") or "null") or {}
    except ValueError:
        direct = {}
    source = str(direct.get("url", "")).removeprefix("file://")
    if (direct.get("dir_info") or {}).get("editable"):
        return f"{found['version']}, editable from {source}"
    return f"{found['version']}" + (f", from {source}" if source else "")
