"""Running a v1 eval in process (upstream's ``run_eval``, the path its e2e tests take): every
task of the env's taskset (the first ``num_tasks``, shuffled when asked) ``num_rollouts``
times against the config's model and endpoint, at most ``max_concurrent`` episodes at once.
A failed rollout is an error on its trace; the run goes on. With ``output_dir`` the episodes
are written to ``traces.jsonl`` there, one ``WireEpisode`` a line. The taskset's shared
toolsets (``SharedToolsetConfig``) are served once for the run (``Env.serving``).

``vf-eval ID`` runs a v1 taskset through the classic engine instead (``eval_env.py``: results,
report, resume); the env-server path (``run_eval_server``) is not in this SDK yet.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from verifiers.v1.agent import ModelContext
from verifiers.v1.configs.cli.eval import EvalConfig
from verifiers.v1.episode import Episode

TRACES_FILE = "traces.jsonl"


async def run_eval(env: Any, config: EvalConfig) -> list[Episode[Any, Any, Any]]:
    """Evaluate ``env`` as ``config`` says; its episodes, task by task."""
    taskset = env.taskset
    if config.num_tasks is not None:
        taskset = taskset.head(config.num_tasks)
    if config.shuffle:
        taskset = taskset.shuffle()
    context = ModelContext(
        base_url=config.client.base_url,
        model=config.model,
        api_key=os.environ.get(config.client.api_key_var),
        headers=dict(config.client.headers),
        sampling=config.sampling.model_dump(exclude_none=True),
    )
    limit = asyncio.Semaphore(config.max_concurrent or 1 << 30)

    async def one(task: Any) -> Episode[Any, Any, Any]:
        async with limit:
            return await env.run_episode(task, context)

    async with env.serving():  # shared tool servers live for the whole run
        episodes = list(
            await asyncio.gather(
                *(one(task) for task in taskset for _ in range(config.num_rollouts))
            )
        )
    if config.output_dir is not None:
        config.output_dir.mkdir(parents=True, exist_ok=True)
        with (config.output_dir / TRACES_FILE).open("a", encoding="utf-8") as f:
            f.writelines(episode.model_dump_json() + "\n" for episode in episodes)
    return episodes


async def run_eval_server(config: EvalConfig) -> list[Any]:
    """Evaluate through env-server workers; not in this SDK yet."""
    raise NotImplementedError(
        "v1 evals through env-server workers are not in this SDK yet (issue 41); run in "
        "process (run_eval) or with vf-eval"
    )
