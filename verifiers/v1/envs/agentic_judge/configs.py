"""The agentic judge's score config: how a judge's verdict joins the taskset's own rewards."""

from __future__ import annotations

from pydantic import FiniteFloat

from verifiers.v1.configs.base import BaseConfig


class ScoreConfig(BaseConfig):
    """How a judge's verdict joins the taskset's own rewards on the solver's trace."""

    task_weight: FiniteFloat = 0.0
    """The factor on the taskset's own rewards (0: the verdict alone)."""
    judge_weight: FiniteFloat = 1.0
    """The weight of the judge's verdict."""


__all__ = ["ScoreConfig"]
