"""Classic module path ``verifiers.envs.reasoninggym_env``."""

from verifiers.envs.integrations.reasoning_gym_env import ReasoningGymEnv

__all__ = ["ReasoningGymEnv"]
