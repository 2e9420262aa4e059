"""Upstream's ``verifiers.v1.clients`` names: the endpoint configs and the model context a
standalone agent or a rollout is given (each rollout opens its own OpenAI client)."""

from verifiers.v1.agent import ModelContext
from verifiers.v1.configs.client import (
    BaseClientConfig,
    ClientConfig,
    EvalClientConfig,
    TrainClientConfig,
)

__all__ = [
    "BaseClientConfig",
    "ClientConfig",
    "EvalClientConfig",
    "ModelContext",
    "TrainClientConfig",
]
