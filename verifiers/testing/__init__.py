"""Test helpers for environment authors: a scripted model server on loopback (OpenAI chat and
completions, Responses, Anthropic Messages), where this SDK's commands live, and process-tree
checks that a run leaves nothing running (``verifiers.testing.processes``)."""

import sys
from pathlib import Path

from verifiers.testing.server import (
    STALL_TIMEOUT_S,
    STALLED_S,
    ModelServer,
    Reply,
    conversation,
    echo,
    last_user_text,
    tokenize,
)


def cli(name: str) -> str:
    """The path of one of this SDK's commands (``vf-eval``, ``prime``...) for the interpreter
    running now: tests started as ``.venv/bin/python -m pytest`` have no activated virtualenv,
    so the commands are not on PATH."""
    return str(Path(sys.executable).parent / name)


__all__ = [
    "STALLED_S",
    "STALL_TIMEOUT_S",
    "ModelServer",
    "Reply",
    "cli",
    "conversation",
    "echo",
    "last_user_text",
    "tokenize",
]
