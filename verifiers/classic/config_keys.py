"""``vf.ensure_keys``: an environment checks the secrets it needs before doing any work."""

from __future__ import annotations

import os

from verifiers.errors import VFError


class MissingKeyError(VFError, ValueError):
    """Required environment variables are not set (names every missing one)."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = list(keys)
        super().__init__(
            f"Missing required environment variable(s): {', '.join(self.keys)}. Export them in "
            "the shell that runs the evaluation (e.g. export OPENAI_API_KEY=...), or pass the "
            "value to load_environment if the environment takes it as an argument."
        )


def ensure_keys(keys: list[str]) -> None:
    """Raise ``MissingKeyError`` naming every variable in ``keys`` that is unset or empty."""
    missing = [key for key in keys if not os.environ.get(key)]
    if missing:
        raise MissingKeyError(missing)
