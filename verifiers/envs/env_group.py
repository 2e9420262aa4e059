"""EnvGroup: several environments behind one, each row routed to the environment it came from.

Routing follows the release: up to verifiers 0.1.13 a row's ``task`` names its environment;
from 0.1.14 on, ``info["env_id"]`` does (a list of names for groups inside groups, outermost
first), and ``task`` is left to the task payload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from verifiers import classic
from verifiers.envs.environment import Environment
from verifiers.rubrics.rubric import Rubric, scores_from_states
from verifiers.types import RolloutInput, SamplingArgs, State

ENV_GROUP_INFO_KEY = "env_id"


def _info(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else {}
    if not isinstance(value, Mapping):
        raise ValueError("a row's info must be a dict for EnvGroup routing")
    return dict(value)


def _route(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    raise ValueError("EnvGroup info['env_id'] must be a string or a list of strings")


def _route_value(route: tuple[str, ...]) -> str | list[str] | None:
    return None if not route else route[0] if len(route) == 1 else list(route)


def route_of(row: Mapping[str, Any], by_info: bool) -> tuple[str, ...]:
    """The environment names a row (or state) is routed through."""
    if by_info:
        return _route(_info(row.get("info")).get(ENV_GROUP_INFO_KEY))
    task = row.get("task")
    return (task,) if isinstance(task, str) else ()


class EnvGroupRubric(Rubric):
    """Scores each rollout with the rubric of the environment it was routed to (through that
    rubric's own ``score_group``). Every state gets every environment's metric names; a metric
    another environment defines reads 0."""

    def __init__(self, env_map: dict[str, Environment]) -> None:
        super().__init__()
        self.env_map = env_map
        names: set[str] = set()
        for env in env_map.values():
            names.update(env.rubric._get_reward_func_names())
        self.all_reward_names = sorted(names)
        first = next(iter(env_map.values()), None)
        self.routes_by_info = bool(first is not None and first.release.env_group_routes_by_info)

    def get_reward_func_names(self) -> list[str]:
        return list(self.all_reward_names)

    def _env_of(self, state: State) -> Environment | None:
        route = route_of(state, self.routes_by_info)
        return self.env_map.get(route[0]) if route else None

    async def score_group(self, states: list[State], score_sem: Any = None) -> None:
        by_env: dict[int, tuple[Environment | None, list[State]]] = {}
        for state in states:
            env = self._env_of(state)
            by_env.setdefault(id(env), (env, []))[1].append(state)
        for env, members in by_env.values():
            if env is None:
                self.logger.warning(
                    "No environment found for route %r", route_of(members[0], self.routes_by_info)
                )
                for state in members:
                    state["reward"], state["metrics"] = 0.0, {}
            else:
                await env.rubric.score_group(members, score_sem=score_sem)
            for state in members:
                own = state.get("metrics") or {}
                state["metrics"] = {
                    **dict.fromkeys(self.all_reward_names, 0.0),
                    **{
                        k: v
                        for k, v in own.items()
                        if k in self.all_reward_names or not self.routes_by_info
                    },
                }

    async def compute_scores(
        self, states: list[State]
    ) -> tuple[list[float], dict[str, list[float]]]:
        await self.score_group(states)
        return scores_from_states(states)

    async def cleanup(self, state: State) -> None:
        env = self._env_of(state)
        if env is not None:
            await env.rubric.cleanup(state)
        await super().cleanup(state)


class EnvGroup(Environment):
    """Concatenates the environments' datasets (each row labelled with its environment's name,
    example ids renumbered) and runs each rollout in the environment it belongs to."""

    def __init__(
        self, envs: list[Environment], env_names: list[str] | None = None, **kwargs: Any
    ) -> None:
        if not envs:
            raise ValueError("EnvGroup requires at least one environment")
        names = list(env_names or [f"env_{i}" for i in range(len(envs))])
        if len(names) != len(envs):
            raise ValueError("Number of env_names must match number of envs")
        if len(set(names)) != len(names):
            raise ValueError(f"EnvGroup environment names must be unique, got {names}")
        kinds = {env.message_type for env in envs}
        if len(kinds) > 1:
            raise ValueError(
                "EnvGroup environments must share one message_type (all chat or all completion)"
            )
        self.envs = list(envs)
        self.env_names = names
        self.env_map = dict(zip(names, envs, strict=True))
        self.routes_by_info = envs[0].release.env_group_routes_by_info
        dataset = self._concatenate([(n, e._built("train")) for n, e in self.env_map.items()])
        has_eval = any(e._built("eval") is not None for e in envs)
        eval_parts = (
            [(n, e.dataset_rows("eval")) for n, e in self.env_map.items()] if has_eval else []
        )
        kwargs.pop("oai_tools", None)  # tools are per environment, set on each rollout
        kwargs.pop("tool_defs", None)
        super().__init__(
            dataset=dataset,
            eval_dataset=self._concatenate(eval_parts) if has_eval else None,
            rubric=EnvGroupRubric(self.env_map),
            message_type=envs[0].message_type,
            **kwargs,
        )

    def _concatenate(
        self, parts: Sequence[tuple[str, list[dict[str, Any]] | None]]
    ) -> list[dict[str, Any]] | None:
        rows: list[dict[str, Any]] = []
        for name, dataset in parts:
            for row in dataset or []:
                row = dict(row)
                row.pop("env_id", None)
                if self.routes_by_info:
                    info = _info(row.get("info"))
                    info[ENV_GROUP_INFO_KEY] = _route_value(
                        (name, *_route(info.get(ENV_GROUP_INFO_KEY)))
                    )
                    row["info"] = info
                else:
                    row["task"] = name
                row["example_id"] = len(rows)
                rows.append(row)
        return rows or None

    def format_rows(self, dataset: Any, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        rows = super().format_rows(dataset, *args, **kwargs)
        if self.routes_by_info:
            for row in rows:
                row.pop("task", None)
        return rows

    def env_for_group(self, states: list[State]) -> Environment:
        """Who scores a group: from 0.1.14 on, the environment its rows were routed to (its own
        rubric and metrics, as that release runs a group in its environment); before, the
        group itself (``EnvGroupRubric``: every environment's metric names)."""
        if not self.routes_by_info or not states:
            return self
        route = route_of(states[0], True)
        return self.env_map.get(route[0], self) if route else self

    def run_metadata(self) -> dict[str, Any]:
        """Each member's classic release (members of different releases may share a group)."""
        return {
            **super().run_metadata(),
            "member_releases": {
                name: str(env.release) for name, env in zip(self.env_names, self.envs, strict=True)
            },
        }

    def get_env_for_name(self, name: str) -> Environment:
        if name not in self.env_map:
            raise ValueError(f"No environment found for info['env_id']={name!r}")
        return self.env_map[name]

    def get_env_for_task(self, task: str) -> Environment:
        return self.env_map.get(task, self.envs[0])

    def _child(self, input: RolloutInput) -> tuple[Environment, RolloutInput, tuple[str, ...]]:
        """The environment a row belongs to, the row as that environment sees it (its own part
        of the route removed), and the full route."""
        if not self.routes_by_info:
            return self.get_env_for_task(input.get("task", "default")), _row_copy(input), ()
        route = route_of(input, True)
        if not route:
            if len(self.envs) != 1:
                raise ValueError(
                    "EnvGroup input is missing info['env_id']; use rows from "
                    "EnvGroup.get_dataset()/get_eval_dataset() or provide that routing value."
                )
            route = (self.env_names[0],)
        child = _row_copy(input)
        info = _info(child.get("info"))
        if route[1:]:
            info[ENV_GROUP_INFO_KEY] = _route_value(route[1:])
        else:
            info.pop(ENV_GROUP_INFO_KEY, None)
        if info:
            child["info"] = info
        else:
            child.pop("info", None)
        return self.get_env_for_name(route[0]), child, route

    def _restore_route(self, state: State, route: tuple[str, ...]) -> State:
        if route:
            info = _info(state.get("info"))
            info[ENV_GROUP_INFO_KEY] = _route_value(route)
            state["info"] = info
        return state

    async def init_state(
        self,
        input: RolloutInput,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
    ) -> State:
        env, child, route = self._child(input)
        state = await env.init_state(child, client, model, sampling_args)
        return self._restore_route(state, route)

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        env = (
            self.get_env_for_name(route_of(state, True)[0])
            if self.routes_by_info
            else (self.get_env_for_task(state["task"]))
        )
        return await env.setup_state(state)

    async def rollout(
        self,
        input: RolloutInput,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
    ) -> State:
        env, child, route = self._child(input)
        with classic.written_for(env.release.version):  # each member runs as its own release
            state = await env.rollout(child, client, model, sampling_args)
        return self._restore_route(state, route)

    def set_max_seq_len(self, max_seq_len: int | None) -> None:
        self.max_seq_len = max_seq_len
        for env in self.envs:
            env.set_max_seq_len(max_seq_len)

    def set_score_rollouts(self, score_rollouts: bool) -> None:
        self.score_rollouts = score_rollouts
        for env in getattr(self, "envs", []):
            env.set_score_rollouts(score_rollouts)

    async def _teardown(self) -> None:
        for env in self.envs:
            await env._teardown()
        await super()._teardown()


def _row_copy(row: RolloutInput) -> RolloutInput:
    """A plain-dict copy of an input row (the child's own, so the route can be rewritten)."""
    return cast(RolloutInput, dict(row))
