"""Test helpers for environment authors: a scripted model server on loopback (OpenAI chat and
completions, Responses, Anthropic Messages), where this SDK's commands live, and process-tree
checks that a run leaves nothing running (``verifiers.testing.processes``)."""

from verifiers.testing.commands import cli
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
