"""Asking another Python interpreter about itself (the install target, a user's venv)."""

from __future__ import annotations

import subprocess


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
