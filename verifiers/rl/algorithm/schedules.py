"""Learning-rate schedules: a multiplier of the base LR per optimizer step.

Every schedule starts with ``warmup_steps`` of linear warmup (step 0 trains at 1/warmup of the
LR, not at 0, so no step is wasted), then decays from 1 to ``min_ratio`` over the remaining
``total_steps - warmup_steps`` steps, and holds there if training runs longer.
"""

from __future__ import annotations

import math
from collections.abc import Callable


def _constant(progress: float) -> float:
    return 1.0


def _linear(progress: float) -> float:
    return 1.0 - progress


def _cosine(progress: float) -> float:
    return 0.5 * (1 + math.cos(math.pi * progress))


SCHEDULES: dict[str, Callable[[float], float]] = {
    "constant": _constant,
    "linear": _linear,
    "cosine": _cosine,
}


def lr_factor(
    schedule: str, step: int, warmup_steps: int, total_steps: int, min_ratio: float = 0.0
) -> float:
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown LR schedule {schedule!r}; choose from {', '.join(SCHEDULES)}")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_ratio + (1.0 - min_ratio) * SCHEDULES[schedule](progress)
