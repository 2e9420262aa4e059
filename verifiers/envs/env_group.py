"""EnvGroup: several environments behind one, routed by each row's ``task``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from verifiers.envs.environment import Environment
from verifiers.rubrics.rubric import Rubric
from verifiers.types import RolloutInput, SamplingArgs, State

if TYPE_CHECKING:
    pass


class EnvGroupRubric(Rubric):
    """Scores each group with the rubric of the environment its task belongs to.

    Metrics are the union over environments; a metric another environment defines reads 0.
    """

    def __init__(self, env_map: dict[str, Environment]) -> None:
        super().__init__()
        self.env_map = env_map
        self.metric_names: list[str] = []
        for env in env_map.values():
            for name in env.rubric.get_reward_func_names():
                if name not in self.metric_names:
                    self.metric_names.append(name)

    def get_reward_func_names(self) -> list[str]:
        return list(self.metric_names)

    async def compute_scores(
        self, states: list[State]
    ) -> tuple[list[float], dict[str, list[float]]]:
        n = len(states)
        rewards = [0.0] * n
        metrics = {name: [0.0] * n for name in self.metric_names}
        by_task: dict[str, list[int]] = {}
        for i, state in enumerate(states):
            by_task.setdefault(state.get("task", "default"), []).append(i)
        for task, indices in by_task.items():
            env = self.env_map.get(task)
            if env is None:
                continue
            sub_rewards, sub_metrics = await env.rubric.compute_scores([states[i] for i in indices])
            for j, i in enumerate(indices):
                rewards[i] = sub_rewards[j]
                for name, values in sub_metrics.items():
                    metrics.setdefault(name, [0.0] * n)[i] = values[j]
        return rewards, metrics


class EnvGroup(Environment):
    """Concatenates the environments' datasets (task = environment name, example ids renumbered)."""

    def __init__(
        self, envs: list[Environment], env_names: list[str] | None = None, **kwargs: Any
    ) -> None:
        if not envs:
            raise ValueError("EnvGroup needs at least one environment")
        names = env_names or [env.env_id or f"env_{i}" for i, env in enumerate(envs)]
        if len(names) != len(envs):
            raise ValueError(f"EnvGroup got {len(envs)} environments but {len(names)} names")
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
        eval_dataset = _concatenate(eval_parts) if has_eval else None
        super().__init__(
            dataset=dataset,
            eval_dataset=eval_dataset,
            rubric=EnvGroupRubric(self.env_map),
            message_type=envs[0].message_type,
            **kwargs,
        )

    def get_env_for_task(self, task: str) -> Environment:
        try:
            return self.env_map[task]
        except KeyError:
            raise KeyError(
                f"no environment for task {task!r}; tasks are {self.env_names}"
            ) from None

    async def rollout(
        self,
        input: RolloutInput,
        client: Any,
        model: str,
        sampling_args: SamplingArgs | None = None,
    ) -> State:
        return await self.get_env_for_task(input.get("task", "default")).rollout(
            input, client, model, sampling_args
        )

    async def teardown(self) -> None:
        for env in self.envs:
            await env.teardown()
        await super().teardown()


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
