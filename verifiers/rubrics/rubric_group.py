"""RubricGroup: several rubrics scored together, rewards and same-named metrics summed."""

from __future__ import annotations

import logging
import time
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
        started = time.time()
        for rubric in self.rubrics:
            for state in states:
                state["reward"], state["metrics"] = None, None
            await rubric.score_group(states, score_sem=score_sem)
            for i, state in enumerate(states):
                total[i] += float(state.get("reward") or 0.0)
                for name, value in (state.get("metrics") or {}).items():
                    metrics.setdefault(name, [0.0] * n)[i] += float(value)
        write_scores(states, total, metrics, started)

    @property
    def has_group_rewards(self) -> bool:
        return any(rubric.has_group_rewards for rubric in self.rubrics)

    @property
    def has_advantages(self) -> bool:
        return bool(self._advantage_handlers) or any(r.has_advantages for r in self.rubrics)

    async def compute_advantages(self, states: list[State]) -> list[float] | None:
        own = await super().compute_advantages(states)
        if own is not None:
            return own
        for rubric in self.rubrics:
            values = await rubric.compute_advantages(states)
            if values is not None:
                return values
        return None

    async def cleanup(self, state: State) -> None:
        await super().cleanup(state)
        for rubric in self.rubrics:
            await rubric.cleanup(state)

    async def teardown(self) -> None:
        await super().teardown()
        for rubric in self.rubrics:
            await rubric.teardown()

    async def compute_scores(
        self, states: list[State]
    ) -> tuple[list[float], dict[str, list[float]]]:
        await self.score_group(states)
        return scores_from_states(states)
