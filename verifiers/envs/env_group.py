"""EnvGroup: several environments behind one, routed by each row's ``task``."""

from __future__ import annotations

from typing import Any

from verifiers.envs.environment import Environment
from verifiers.rubrics.rubric import Rubric, scores_from_states
from verifiers.types import RolloutInput, SamplingArgs, State


class EnvGroupRubric(Rubric):
    """Scores each rollout with the rubric of the environment its task belongs to (through that
    rubric's own ``score_group``). Every state gets every environment's metric names; a metric
    another environment defines reads 0."""

    def __init__(self, env_map: dict[str, Environment]) -> None:
        super().__init__()
        self.env_map = env_map
        names: set[str] = set()
        for env in env_map.values():
            names.update(env.rubric._get_reward_func_names())
        self.all_reward_names = sorted(names)

    def get_reward_func_names(self) -> list[str]:
        return list(self.all_reward_names)

    async def score_group(self, states: list[State], score_sem: Any = None) -> None:
        by_task: dict[str, list[State]] = {}
        for state in states:
            by_task.setdefault(state.get("task", "default"), []).append(state)
        for task, members in by_task.items():
            env = self.env_map.get(task)
            if env is None:
                self.logger.warning("No environment found for task %r", task)
                for state in members:
                    state["reward"], state["metrics"] = 0.0, {}
            else:
                await env.rubric.score_group(members, score_sem=score_sem)
            for state in members:
                own = state.get("metrics") or {}
                state["metrics"] = {
                    **{name: 0.0 for name in self.all_reward_names},
                    **{k: v for k, v in own.items()},
                }

    async def compute_scores(
        self, states: list[State]
    ) -> tuple[list[float], dict[str, list[float]]]:
        await self.score_group(states)
        return scores_from_states(states)


class EnvGroup(Environment):
    """Concatenates the environments' datasets (task = environment name, example ids renumbered)."""

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
        dataset = _concatenate([(n, e._rows["train"]) for n, e in self.env_map.items()])
        has_eval = any(e._rows["eval"] is not None for e in envs)
        eval_parts = (
            [(n, e.dataset_rows("eval")) for n, e in self.env_map.items()] if has_eval else []
        )
        kwargs.pop("oai_tools", None)  # tools are per environment, set on each rollout
        super().__init__(
            dataset=dataset,
            eval_dataset=_concatenate(eval_parts) if has_eval else None,
            rubric=EnvGroupRubric(self.env_map),
            message_type=envs[0].message_type,
            **kwargs,
        )

    def get_env_for_task(self, task: str) -> Environment:
        return self.env_map.get(task, self.envs[0])

    async def init_state(
        self,
        input: RolloutInput,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
    ) -> State:
        env = self.get_env_for_task(input.get("task", "default"))
        return await env.init_state(input, client, model, sampling_args)

    async def setup_state(self, state: State, **kwargs: Any) -> State:
        return await self.get_env_for_task(state["task"]).setup_state(state)

    async def rollout(
        self,
        input: RolloutInput,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
    ) -> State:
        env = self.get_env_for_task(input.get("task", "default"))
        return await env.rollout(input, client, model, sampling_args)

    def monitor_metrics(self, state: State) -> dict[str, float]:
        return self.get_env_for_task(state.get("task", "default")).monitor_metrics(state)

    def set_max_seq_len(self, max_seq_len: int | None) -> None:
        self.max_seq_len = max_seq_len
        for env in self.envs:
            env.set_max_seq_len(max_seq_len)

    async def _teardown(self) -> None:
        for env in self.envs:
            await env._teardown()
        await super()._teardown()


def _concatenate(
    parts: list[tuple[str, list[dict[str, Any]] | None]],
) -> list[dict[str, Any]] | None:
    rows: list[dict[str, Any]] = []
    for name, dataset in parts:
        if dataset is None:
            continue
        for row in dataset:
            row = dict(row)
            row["task"] = name
            row["example_id"] = len(rows)
            rows.append(row)
    return rows or None
