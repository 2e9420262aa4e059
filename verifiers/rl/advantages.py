"""Advantage estimators over a group (all rollouts of one prompt), from final summed rewards."""

from __future__ import annotations

import statistics
from collections.abc import Callable

AdvantageFn = Callable[[list[float]], list[float]]


def group_mean(rewards: list[float], scale: bool = False, eps: float = 1e-6) -> list[float]:
    """r - mean(group); with ``scale``, divided by the group's std (GRPO's original form)."""
    if not rewards:
        return []
    mean = statistics.fmean(rewards)
    centered = [r - mean for r in rewards]
    if not scale:
        return centered
    std = statistics.pstdev(rewards)
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
    "leave_one_out": leave_one_out,
}
