"""Classic module path ``verifiers.envs.textarena_env``."""

from verifiers.envs.integrations.textarena_env import TextArenaEnv

__all__ = ["TextArenaEnv"]
