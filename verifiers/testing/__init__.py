"""Test helpers for environment authors: a scripted OpenAI-compatible server on loopback."""

from verifiers.testing.server import ModelServer, Reply, echo, last_user_text, tokenize

__all__ = ["ModelServer", "Reply", "echo", "last_user_text", "tokenize"]
