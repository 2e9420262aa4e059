"""Upstream's module path of the single-agent env."""

from verifiers.v1.configs.env import SingleAgentEnvConfig
from verifiers.v1.env import SingleAgentEnv

__all__ = ["SingleAgentEnv", "SingleAgentEnvConfig"]
