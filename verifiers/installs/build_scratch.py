"""A build backend's temporary files, inside the directory its caller removes.

Build backends (hatchling, setuptools) write a wheel to a temporary file in ``$TMPDIR`` before
moving it to the output directory, so a build stopped midway (a signal, a killed process) left
that file in the shared temporary directory. Each build this project runs gets a ``TMPDIR``
inside its own scratch directory instead: whatever a stopped build leaves goes with it.
"""

from __future__ import annotations

import os
from pathlib import Path

SCRATCH = ".build-tmp"


def build_env(within: Path) -> dict[str, str]:
    """This process's environment with ``TMPDIR`` in ``within`` (made here), for a build."""
    scratch = within / SCRATCH
    scratch.mkdir(exist_ok=True)
    return {**os.environ, "TMPDIR": str(scratch)}
