"""Whole-rollout retry policy: which captured errors rerun a rollout, and how often."""

from __future__ import annotations

from pydantic import Field

from verifiers.v1.configs.base import BaseConfig


class RetryConfig(BaseConfig):
    """``include``/``exclude`` name error classes (``ProviderError``, ``SandboxError``...)."""

    max_retries: int = Field(0, ge=0)
    """Retries after the first attempt (0: a failed rollout is recorded, not rerun)."""
    include: list[str] = Field(default_factory=list)
    """Retry only these error kinds (empty: any kind not excluded)."""
    exclude: list[str] = Field(default_factory=list)
    """Never retry these error kinds (wins over ``include``)."""
