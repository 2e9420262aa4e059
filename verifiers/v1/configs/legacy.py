"""The ``[legacy]`` block: a classic environment (``vf.load_environment``) run through the v1
bridge instead of a v1 ``[env]``."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from verifiers.v1.configs.base import BaseConfig
from verifiers.v1.types import ID


class LegacyEnvConfig(BaseConfig):
    id: ID | None = None
    """The classic environment's id (``name``, ``owner/name``, ``owner/name@version``)."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of its ``load_environment``."""
    extra_env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Set on the loaded environment (``env.set_kwargs``), e.g. by a trainer."""
