"""Asking another Python interpreter about itself (the install target, a user's venv)."""

from __future__ import annotations

import subprocess
import sys

_PREFIXES: dict[str, str] = {}


def ask(
    python: str, code: str, *args: str, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in ``python`` (another interpreter, asked about itself) without the
    caller's working directory on its path: run from a checkout, ``./verifiers`` would answer
    for the SDK it has installed, and a project's own modules would look installed in it."""
    own_path = "import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]\n"
    return subprocess.run(
        [python, "-c", own_path + code, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=check,
    )


def prefix_of(python: str) -> str | None:
    """``python``'s ``sys.prefix`` (this interpreter's own unasked), or None where it gave none
    (or could not be run).
    Asked once per process: an install needs it at several steps (its records, its lock, its
    stage), and each ask starts that Python, a good part of a warm install's own time."""
    if python == sys.executable:
        return sys.prefix
    if python not in _PREFIXES:
        try:
            found = ask(python, "print(sys.prefix)").stdout.strip()
        except (OSError, subprocess.SubprocessError):  # not a Python: the caller says so
            return None
        if not found:
            return None
        _PREFIXES[python] = found
    return _PREFIXES[python]
