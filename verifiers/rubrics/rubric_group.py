"""RubricGroup: several rubrics scored together, rewards and same-named metrics summed."""

from __future__ import annotations

import logging
from typing import Any

from verifiers.rubrics.rubric import Rubric, scores_from_states, write_scores
from verifiers.types import State


class RubricGroup(Rubric):
    """Scores each rubric through its own ``score_group`` (so subclasses that override it count)
    and sums the rewards; metrics keep each function's value (same names add up).

    Advantages are never computed here: the engine derives them from the final summed reward of
    the whole group, so a rubric cannot normalize against a partial score.
    """

    def __init__(self, rubrics: list[Rubric], **kwargs: Any) -> None:
        if not rubrics:
            raise ValueError("RubricGroup must have at least one rubric")
        kwargs.setdefault("parser", rubrics[0].parser)
        super().__init__(**kwargs)
        self.rubrics = list(rubrics)

    def add_reward_func(self, func, weight: float = 1.0) -> None:
        if not hasattr(self, "rubrics"):
            return super().add_reward_func(func, weight)
        assert self.rubrics, "RubricGroup must have at least one rubric"
        logging.getLogger("verifiers.rubrics.RubricGroup").warning(
            "Adding reward function to the first rubric in the group."
        )
        self.rubrics[0].add_reward_func(func, weight)

    def add_class_object(self, name: str, obj: Any) -> None:
        for rubric in self.rubrics:
            rubric.add_class_object(name, obj)

    def get_reward_funcs(self):
        return [f for r in self.rubrics for f in r._get_reward_funcs()]

    def get_reward_weights(self):
        return [w for r in self.rubrics for w in r._get_reward_weights()]

    def get_reward_func_names(self):
        return [n for r in self.rubrics for n in r._get_reward_func_names()]

    async def score_group(self, states: list[State], score_sem: Any = None) -> None:
        n = len(states)
        total = [0.0] * n
        metrics: dict[str, list[float]] = {}
        scoring_ms = 0.0
        for rubric in self.rubrics:
            for state in states:
                state["reward"], state["metrics"] = None, None
            await rubric.score_group(states, score_sem=score_sem)
            for i, state in enumerate(states):
                total[i] += float(state.get("reward") or 0.0)
                for name, value in (state.get("metrics") or {}).items():
                    metrics.setdefault(name, [0.0] * n)[i] += float(value)
            timing = states[0].get("timing") if states else None
            if isinstance(timing, dict):
                scoring_ms += float(timing.get("scoring_ms") or 0.0)
        write_scores(states, total, metrics, scoring_ms)

    async def compute_scores(
        self, states: list[State]
    ) -> tuple[list[float], dict[str, list[float]]]:
        await self.score_group(states)
        return scores_from_states(states)
