"""A rollout's timing, in whichever form its release keeps it.

Environments of verifiers 0.1.x before 0.1.11 keep ``state["timing"]`` as a dict of milliseconds
(``generation_ms``, ``scoring_ms``, ``total_ms``, ``model_ms``, ``start_time``); later ones as a
``vf.RolloutTiming`` of wall-clock spans. The engine records through these functions, and the
results file reads milliseconds from either.
"""

from __future__ import annotations

import time
from typing import Any

from verifiers.messages.models import RolloutTiming, TimeSpan


def new_timing(typed: bool) -> Any:
    if typed:
        return RolloutTiming()
    return {
        "generation_ms": 0.0,
        "scoring_ms": 0.0,
        "total_ms": 0.0,
        "model_ms": 0.0,
        "start_time": time.time(),
    }


def start_generation(timing: Any) -> None:
    now = time.time()
    if isinstance(timing, RolloutTiming):
        timing.generation.start = now
    elif isinstance(timing, dict):
        timing["start_time"] = now


def end_generation(timing: Any) -> None:
    now = time.time()
    if isinstance(timing, RolloutTiming):
        if timing.generation.start <= 0.0:
            timing.generation.start = timing.start_time
        timing.generation.end = now
    elif isinstance(timing, dict):
        elapsed = (now - timing.get("start_time", now)) * 1000.0
        timing["generation_ms"] = elapsed
        timing["total_ms"] = elapsed + timing.get("scoring_ms", 0.0)


def add_span(timing: Any, kind: str, start: float, end: float) -> None:
    """One model call (``kind="model"``) or environment reply (``"env"``)."""
    if isinstance(timing, RolloutTiming):
        getattr(timing, kind).spans.append(TimeSpan(start=start, end=end))
    elif isinstance(timing, dict) and kind == "model":
        timing["model_ms"] = timing.get("model_ms", 0.0) + (end - start) * 1000.0


def set_setup(timing: Any, start: float, end: float) -> None:
    if isinstance(timing, RolloutTiming):
        timing.setup = TimeSpan(start=start, end=end)


def set_scoring(timing: Any, start: float, end: float) -> None:
    if isinstance(timing, RolloutTiming):
        timing.scoring = TimeSpan(start=start, end=end)
    elif isinstance(timing, dict):
        timing["scoring_ms"] = (end - start) * 1000.0
        timing["total_ms"] = timing.get("generation_ms", 0.0) + timing["scoring_ms"]


def milliseconds(timing: Any) -> dict[str, float]:
    """``generation_ms``, ``scoring_ms``, ``total_ms``, ``model_ms`` of either form."""
    keys = ("generation_ms", "scoring_ms", "total_ms", "model_ms")
    if isinstance(timing, RolloutTiming):
        return {key: float(getattr(timing, key)) for key in keys}
    if isinstance(timing, dict):
        return {key: float(timing.get(key) or 0.0) for key in keys}
    return dict.fromkeys(keys, 0.0)
