"""Where this SDK's commands live, for tests that run them."""

import sys
from pathlib import Path


def cli(name: str) -> str:
    """The path of one of this SDK's commands (``vf-eval``, ``prime``...) for the interpreter
    running now: tests started as ``.venv/bin/python -m pytest`` have no activated virtualenv,
    so the commands are not on PATH."""
    return str(Path(sys.executable).parent / name)
