"""Upstream's built-in ``user-sim`` env (``--env.id user-sim``): a modeled user converses with
the assistant under evaluation."""

from verifiers.v1.envs.user_sim.env import UserSimEnv, UserSimEnvConfig

__all__ = ["UserSimEnv", "UserSimEnvConfig"]
