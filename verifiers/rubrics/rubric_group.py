"""RubricGroup: several rubrics scored together, rewards summed."""

from __future__ import annotations

from typing import Any

from verifiers.rubrics.rubric import Rubric
from verifiers.types import State


class RubricGroup(Rubric):
    """Sums the rubrics' rewards; metrics keep each function's value (same names add up).

    Advantages are never computed here: the engine derives them from the final summed reward of
    the whole group, so a rubric cannot normalize against a partial score.
    """

    def __init__(self, rubrics: list[Rubric], **kwargs: Any) -> None:
        if not rubrics:
            raise ValueError("RubricGroup needs at least one rubric")
        super().__init__(parser=kwargs.pop("parser", rubrics[0].parser), **kwargs)
        self.rubrics = list(rubrics)

    def add_reward_func(self, func, weight: float = 1.0) -> None:
        if not hasattr(self, "rubrics"):
            return super().add_reward_func(func, weight)
        self.rubrics[0].add_reward_func(func, weight)

    def add_class_object(self, name: str, obj: Any) -> None:
        for rubric in self.rubrics:
            rubric.add_class_object(name, obj)

    def get_reward_funcs(self):
        return [f for r in self.rubrics for f in r.get_reward_funcs()]

    def get_reward_weights(self):
        return [w for r in self.rubrics for w in r.get_reward_weights()]

    def get_reward_func_names(self):
        return [n for r in self.rubrics for n in r.get_reward_func_names()]

    async def compute_scores(
        self, states: list[State]
    ) -> tuple[list[float], dict[str, list[float]]]:
        total = [0.0] * len(states)
        metrics: dict[str, list[float]] = {}
        for rubric in self.rubrics:
            rewards, rubric_metrics = await rubric.compute_scores(states)
            total = [a + b for a, b in zip(total, rewards, strict=True)]
            for name, values in rubric_metrics.items():
                if name in metrics:
                    metrics[name] = [a + b for a, b in zip(metrics[name], values, strict=True)]
                else:
                    metrics[name] = values
        return total, metrics
