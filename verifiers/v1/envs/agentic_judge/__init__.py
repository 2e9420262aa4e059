"""The agentic judge's configs (upstream's ``agentic-judge`` env, a judge agent grading a
solver in a container, is not in this SDK: its id fails to load, saying so)."""

from verifiers.v1.envs.agentic_judge.configs import ScoreConfig

__all__ = ["ScoreConfig"]
