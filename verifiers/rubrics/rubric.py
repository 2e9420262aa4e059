"""Rubric: weighted reward functions, called with the arguments they name.

A reward function is a plain Python function. It receives, by parameter name, any of ``prompt``,
``completion``, ``answer``, ``state``, ``task``, ``info``, ``example_id``, ``parser`` and the
rubric's injected objects (``add_class_object``); ``**kwargs`` receives all of them. Functions whose
parameters are plural (``prompts``, ``completions``, ``answers``, ``states``, ``tasks``, ``infos``)
score a whole group at once and return one value per rollout. A weight of 0 makes a metric.

A function that raises scores 0 for that rollout; the error is kept in ``state["reward_errors"]``.

For environments of verifiers 0.1.14+, whose state holds the row as a task payload
(``state["task"]`` a dict), ``task`` is that payload and the row's other columns are passed by
name too (a ``difficulty`` column reaches a ``difficulty`` parameter). Methods a subclass marks
with ``@vf.reward`` / ``@vf.metric`` are added as reward functions, ``@vf.advantage`` computes the
group's advantages, and ``@vf.cleanup`` / ``@vf.teardown`` run from ``cleanup`` / ``teardown``.

Over 400 lines, not split: the classic ``Rubric`` is one public surface (reward functions,
weights, group rewards, parallel scoring), kept whole for the environments written against it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from verifiers import decorators
from verifiers.concurrency import NullAsyncContext, maybe_await
from verifiers.errors import RewardFunctionError, to_record
from verifiers.parsers.parser import Parser
from verifiers.types import TASK_INPUT_FIELDS, Messages, RolloutScore, RolloutScores, State

GROUP_PARAMS = frozenset(
    {"prompts", "completions", "answers", "states", "tasks", "infos", "example_ids"}
)
_PLURAL = {
    "prompts": "prompt",
    "completions": "completion",
    "answers": "answer",
    "states": "state",
    "tasks": "task",
    "infos": "info",
    "example_ids": "example_id",
}


class _Signature:
    """What a reward function asks for, computed once per function."""

    __slots__ = ("accepts_all", "is_async", "is_group", "name", "params")

    def __init__(self, func: Callable[..., Any]) -> None:
        sig = inspect.signature(func)
        self.params = frozenset(
            p.name
            for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        )
        self.accepts_all = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        self.is_group = (
            bool(self.params & GROUP_PARAMS)
            or getattr(func, "_vf_group", False)
            or getattr(func, "reward_stage", None) == "group"
            or getattr(func, "metric_stage", None) == "group"
            or sig.return_annotation in (list, "list")
            or getattr(sig.return_annotation, "__origin__", None) is list
        )
        self.is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
            type(func).__call__
        )
        self.name = getattr(func, "__name__", type(func).__name__)

    def select(self, available: dict[str, Any]) -> dict[str, Any]:
        if self.accepts_all:
            return available
        return {k: v for k, v in available.items() if k in self.params}


def group_reward_func(func: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a reward function as group-level even when its parameter names are singular."""
    func._vf_group = True  # type: ignore[attr-defined]  # a mark on the function, read by getattr
    return func


class Rubric:
    """Weighted reward functions. Override ``score_group`` (or ``score_rollout``) for custom
    scoring; ``RubricGroup`` and the rollout engine call those, never the internals.

    Rollouts that ended in an error score 0 without calling the functions, unless the rubric
    sets ``score_errored_rollouts`` (monitor rubrics do: a failed rollout still took turns).
    """

    score_errored_rollouts = False

    def __init__(
        self,
        funcs: Sequence[Callable[..., Any]] | None = None,
        weights: Sequence[float] | None = None,
        parser: Parser | None = None,
        parallelize_scoring: bool = True,
    ) -> None:
        self.logger = logging.getLogger(f"verifiers.rubrics.{type(self).__name__}")
        self.funcs: list[Callable[..., Any]] = []
        self.weights: list[float] = []
        self._signatures: list[_Signature] = []
        self.parser = parser or Parser()
        self.parallelize_scoring = parallelize_scoring
        self.class_objects: dict[str, Any] = {"parser": self.parser}
        funcs = list(funcs or [])
        if weights and len(weights) != len(funcs):
            raise ValueError(
                f"Number of weights ({len(weights)}) must match number of functions ({len(funcs)})"
            )
        for func, weight in zip(funcs, weights or [1.0] * len(funcs), strict=True):
            self.add_reward_func(func, weight)
        self.score_object_providers: list[Callable[[State], dict[str, Any]]] = []
        self.group_score_object_providers: list[Callable[[list[State]], dict[str, Any]]] = []
        for method in decorators.collect(self, "reward"):
            self.add_reward_func(method, getattr(method, "reward_weight", 1.0))
        for method in decorators.collect(self, "metric"):
            self.add_metric(method)
        self._advantage_handlers = decorators.collect(self, "advantage")
        self._cleanup_handlers = decorators.collect(self, "cleanup")
        self._teardown_handlers = decorators.collect(self, "teardown")

    # --- classic accessors ---------------------------------------------------------------------
    @property
    def reward_funcs(self) -> list[Callable[..., Any]]:
        return self.funcs

    @property
    def reward_weights(self) -> list[float]:
        return self.weights

    def get_reward_funcs(self) -> list[Callable[..., Any]]:
        return list(self.funcs)

    def get_reward_weights(self) -> list[float]:
        return list(self.weights)

    def get_reward_func_names(self) -> list[str]:
        return [s.name for s in self._signatures]

    # the classic private spellings, read by subclasses and tests
    def _get_reward_funcs(self) -> list[Callable[..., Any]]:
        return self.get_reward_funcs()

    def _get_reward_weights(self) -> list[float]:
        return self.get_reward_weights()

    def _get_reward_func_names(self) -> list[str]:
        return self.get_reward_func_names()

    def _is_group_func(self, func: Callable[..., Any]) -> bool:
        return _Signature(func).is_group

    def add_reward_func(self, func: Callable[..., Any], weight: float = 1.0) -> None:
        if not callable(func):
            raise TypeError(f"reward function must be callable, got {type(func).__name__}")
        self.funcs.append(func)
        self.weights.append(float(weight))
        self._signatures.append(_Signature(func))

    def add_metric(self, func: Callable[..., Any], weight: float = 0.0) -> None:
        self.add_reward_func(func, weight=weight)

    def add_class_object(self, name: str, obj: Any) -> None:
        self.class_objects[name] = obj

    def add_score_object_provider(self, provider: Callable[[State], dict[str, Any]]) -> None:
        """Extra named arguments for each rollout's reward functions, computed from its state."""
        self.score_object_providers.append(provider)

    def add_group_score_object_provider(
        self, provider: Callable[[list[State]], dict[str, Any]]
    ) -> None:
        self.group_score_object_providers.append(provider)

    @property
    def has_group_rewards(self) -> bool:
        return any(sig.is_group for sig in self._signatures)

    @property
    def has_advantages(self) -> bool:
        return bool(self._advantage_handlers)

    async def compute_advantages(self, states: list[State]) -> list[float] | None:
        """The group's advantages from an ``@vf.advantage`` method (None: the engine's default)."""
        for handler in self._advantage_handlers:
            values = await maybe_await(handler, states)
            if values is not None:
                values = [float(v) for v in values]
                if len(values) != len(states):
                    raise RewardFunctionError(
                        f"advantage function {handler.__name__} returned {len(values)} values "
                        f"for {len(states)} rollouts"
                    )
                return values
        return None

    async def cleanup(self, state: State) -> None:
        """Run this rubric's ``@vf.cleanup`` methods for a finished rollout."""
        for handler in self._cleanup_handlers:
            await maybe_await(handler, state)

    async def teardown(self) -> None:
        for handler in self._teardown_handlers:
            await maybe_await(handler)

    async def dummy_score_rollout(self, state: State) -> None:
        """Reward 0 and no metrics (``score_rollouts=False``: generation without scoring)."""
        state["reward"], state["metrics"] = 0.0, {}

    async def dummy_score_group(self, states: list[State]) -> None:
        for state in states:
            await self.dummy_score_rollout(state)

    # --- scoring ---------------------------------------------------------------------------------
    async def score_group(self, states: list[State], score_sem: Any = None) -> None:
        """Score all rollouts of one example; writes ``reward``, ``metrics`` and timing into each
        state. Advantages are the engine's job (from the final summed reward), not the rubric's."""
        if not states:
            return
        start = time.time()
        async with score_sem if score_sem is not None else NullAsyncContext():
            rewards, metrics = await self.compute_scores(states)
        write_scores(states, rewards, metrics, start)

    async def compute_scores(
        self, states: list[State]
    ) -> tuple[list[float], dict[str, list[float]]]:
        """Weighted reward and each function's value per state. Errored rollouts score 0."""
        n = len(states)
        live = [
            i for i, s in enumerate(states) if self.score_errored_rollouts or not s.get("error")
        ]
        rewards = [0.0] * n
        metrics: dict[str, list[float]] = {}
        live_states = [states[i] for i in live]
        live_args = [self._arguments(s) for s in live_states]
        for func, weight, sig in zip(self.funcs, self.weights, self._signatures, strict=True):
            values = [0.0] * n
            if live:
                if sig.is_group:
                    scored = await self._call_group(func, sig, live_states, live_args)
                else:
                    scored = await self._call_each(func, sig, live_states, live_args)
                for i, value in zip(live, scored, strict=True):
                    values[i] = value
            name = sig.name if sig.name not in metrics else f"{sig.name}_{len(metrics)}"
            metrics[name] = values
            if weight:
                for i in range(n):
                    rewards[i] += weight * values[i]
        return rewards, metrics

    def _arguments(self, state: State) -> dict[str, Any]:
        args: dict[str, Any] = {}
        task = state.get("task", "default")
        if isinstance(task, dict):  # a 0.1.14+ task payload: its other columns by name too
            row = state.get("input")
            if isinstance(row, dict):
                args.update({k: v for k, v in row.items() if k not in TASK_INPUT_FIELDS})
            args.update({k: v for k, v in task.items() if k not in TASK_INPUT_FIELDS})
        args.update(self.class_objects)
        args.update(
            prompt=state["prompt"],
            completion=state.get("completion"),
            answer=state.get("answer", ""),
            state=state,
            task=task,
            info=state.get("info") or {},
            example_id=state.get("example_id"),
        )
        for provider in self.score_object_providers:
            args.update(provider(state))
        return args

    async def _call_each(
        self,
        func: Callable[..., Any],
        sig: _Signature,
        states: list[State],
        args: list[dict[str, Any]],
    ) -> list[float]:
        # one state (a group of one rollout) is awaited in place: a task of its own cost each
        # async function ~20 us a rollout (its task, the gather, two turns of the loop)
        if sig.is_async and self.parallelize_scoring and len(states) > 1:
            return list(
                await asyncio.gather(
                    *(self._call_one(func, sig, s, a) for s, a in zip(states, args, strict=True))
                )
            )
        return [await self._call_one(func, sig, s, a) for s, a in zip(states, args, strict=True)]

    async def _call_one(
        self, func: Callable[..., Any], sig: _Signature, state: State, args: dict[str, Any]
    ) -> float:
        try:
            result = await maybe_await(func, **sig.select(args))
            return _as_reward(result, sig.name)
        except Exception as exc:  # a broken reward function must not kill the run
            _record_reward_error(state, sig.name, exc)
            return 0.0

    async def _call_group(
        self,
        func: Callable[..., Any],
        sig: _Signature,
        states: list[State],
        per_state: list[dict[str, Any]],
    ) -> list[float]:
        args = dict(self.class_objects)
        for plural, singular in _PLURAL.items():
            args[plural] = [a[singular] for a in per_state]
        for provider in self.group_score_object_providers:
            args.update(provider(states))
        try:
            result = await maybe_await(func, **sig.select(args))
            values = list(result)
            if len(values) != len(states):
                raise RewardFunctionError(
                    f"group reward function {sig.name} returned {len(values)} values for {len(states)} rollouts"
                )
            return [_as_reward(v, sig.name) for v in values]
        except Exception as exc:
            for state in states:
                _record_reward_error(state, sig.name, exc)
            return [0.0] * len(states)

    # --- classic entry points --------------------------------------------------------------------
    async def score_rollout(
        self,
        state: State | None = None,
        score_sem: Any = None,
        *,
        prompt: Messages | None = None,
        completion: Messages | None = None,
        answer: Any = "",
        task: str = "default",
        info: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> RolloutScore | None:
        """Score one rollout in place (``state["reward"]``, ``state["metrics"]``, timing);
        group-level functions see a group of one.

        The pre-0.1.8 keyword form (``prompt=, completion=, answer=, ...``) scores those fields
        and returns a ``RolloutScore`` instead.
        """
        if prompt is not None or completion is not None:
            full = _standalone_state(prompt, completion, answer, state, task, info)
            rewards, metrics = await self.compute_scores([full])
            return RolloutScore(reward=rewards[0], metrics={k: v[0] for k, v in metrics.items()})
        if state is None:
            raise TypeError("score_rollout needs a state (or prompt= and completion=)")
        await self.score_group([state], score_sem=score_sem)
        return None

    async def score_rollouts(
        self,
        prompts: list[Messages],
        completions: list[Messages],
        answers: list[Any],
        states: list[State],
        tasks: list[str],
        infos: list[dict[str, Any]],
        **kwargs: Any,
    ) -> RolloutScores:
        """Scores for parallel lists of rollout fields (the pre-0.1.8 entry point)."""
        full = [
            _standalone_state(p, c, a, s, t, i)
            for p, c, a, s, t, i in zip(
                prompts, completions, answers, states, tasks, infos, strict=True
            )
        ]
        rewards, metrics = await self.compute_scores(full)
        return RolloutScores(reward=rewards, metrics=metrics)


def scores_from_states(states: list[State]) -> tuple[list[float], dict[str, list[float]]]:
    """Read back the rewards and metrics ``score_group`` wrote, for rubrics that score in place."""
    names = list(dict.fromkeys(k for s in states for k in (s.get("metrics") or {})))
    return (
        [float(s.get("reward") or 0.0) for s in states],
        {k: [(s.get("metrics") or {}).get(k, 0.0) for s in states] for k in names},
    )


def write_scores(
    states: list[State], rewards: list[float], metrics: dict[str, list[float]], started: float = 0.0
) -> None:
    """Store each state's reward, metrics and advantage (reward minus the group's mean, as a
    classic rubric does; the engine recomputes it from the final summed reward). The engine
    records the scoring time."""
    mean = sum(rewards) / len(rewards) if rewards else 0.0
    for i, state in enumerate(states):
        state["reward"] = rewards[i]
        state["advantage"] = rewards[i] - mean
        state["metrics"] = {name: values[i] for name, values in metrics.items()}


def _as_reward(value: Any, name: str) -> float:
    if isinstance(value, bool):
        return float(value)
    if value is None:
        raise RewardFunctionError(f"reward function {name} returned None; return a float")
    try:
        result = float(value)
    except (TypeError, ValueError) as exc:
        raise RewardFunctionError(
            f"reward function {name} returned {type(value).__name__}, not a number"
        ) from exc
    if math.isnan(result):
        raise RewardFunctionError(f"reward function {name} returned NaN")
    return result


def _record_reward_error(state: State, name: str, exc: Exception) -> None:
    record = to_record(exc, phase="scoring")
    record["function"] = name
    errors = state.get("reward_errors")
    if errors is None:
        errors = []
        state["reward_errors"] = errors
    errors.append(record)


def _standalone_state(prompt, completion, answer, state, task, info) -> State:
    full = state if isinstance(state, State) else State(state or {})
    full["input"] = {
        "prompt": prompt,
        "answer": answer,
        "task": task,
        "info": info or {},
        "example_id": full.get("example_id", 0),
    }
    dict.__setitem__(full, "completion", completion)
    return full
