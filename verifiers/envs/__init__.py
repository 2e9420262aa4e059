from verifiers.envs.env_group import EnvGroup
from verifiers.envs.environment import Environment
from verifiers.envs.multiturn_env import MultiTurnEnv
from verifiers.envs.singleturn_env import SingleTurnEnv

__all__ = ["EnvGroup", "Environment", "MultiTurnEnv", "SingleTurnEnv"]
