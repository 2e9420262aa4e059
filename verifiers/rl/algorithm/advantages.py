"""Advantage estimators over the groups of a step (a group: the rollouts of one prompt), from
final rewards.

The orchestrator passes only the rollouts that belong in the baseline: a rollout that failed for
reasons not the policy's (server, environment, tool errors) is left out, not counted as reward 0.
Every estimator centres on the group; ``group_mean_batch_std`` then divides by the std of every
reward of the step's batch (TRL's ``scale_rewards = "batch"``), the others work group by group.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from verifiers.envs.generation import group_advantages

AdvantageFn = Callable[[list[float]], list[float]]

STD_EPSILON = 1e-4
"""Added to the group's std before dividing (as TRL): a group with nearly equal rewards gets
large but finite advantages; an exactly uniform group gets 0."""


def group_mean(rewards: list[float], scale: bool = False, eps: float = STD_EPSILON) -> list[float]:
    """r - mean(group); with ``scale``, divided by the group's sample std (n - 1) plus ``eps``,
    GRPO's form (DeepSeekMath §4.1.2; TRL's ``rewards.std()``)."""
    centered = group_advantages(rewards)  # the rollout engine's own baseline, one definition
    if not scale or not rewards:
        return centered
    std = statistics.stdev(rewards) if len(rewards) > 1 else 0.0
    return [c / (std + eps) for c in centered]


def leave_one_out(rewards: list[float]) -> list[float]:
    """RLOO: r_i minus the mean of the *other* rollouts' rewards (unbiased baseline)."""
    n = len(rewards)
    if n < 2:
        return [0.0] * n
    total = sum(rewards)
    return [r - (total - r) / (n - 1) for r in rewards]


ESTIMATORS: dict[str, AdvantageFn] = {
    "group_mean": group_mean,
    "group_mean_std": lambda rewards: group_mean(rewards, scale=True),
    "group_mean_batch_std": group_mean,  # centred per group; scaled by batch_advantages
    "leave_one_out": leave_one_out,
}


def batch_advantages(
    name: str, groups: list[list[float]], batch: list[float] | None = None
) -> list[list[float]]:
    """Each group's advantages by estimator ``name``; for ``group_mean_batch_std`` scaled by the
    sample std of ``batch`` (every reward the step drew; default: the groups'), plus eps."""
    centred = [ESTIMATORS[name](rewards) for rewards in groups]
    if name != "group_mean_batch_std":
        return centred
    pool = batch if batch is not None else [r for rewards in groups for r in rewards]
    std = statistics.stdev(pool) if len(pool) > 1 else 0.0
    return [[a / (std + STD_EPSILON) for a in group] for group in centred]
