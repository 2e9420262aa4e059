"""Running a v1 eval (upstream's ``run_eval`` and ``run_eval_server``): every task of the
env's taskset (shuffled when asked, then the first ``num_tasks``, as upstream picks them)
``num_rollouts`` times against the config's model and endpoint, at most ``max_concurrent``
episodes at once. A failed rollout is an error on its trace; the run goes on. With
``output_dir`` the episodes are written to ``traces.jsonl`` there, one ``WireEpisode`` a line.

``run_eval`` runs the episodes in this process, the taskset's shared toolsets
(``SharedToolsetConfig``) served once for the run (``Env.serving``). ``run_eval_server`` runs
them in the workers of a ``vf-env-server`` it starts on loopback for the run (``[serve]``'s
pool: how many workers), each worker serving the shared toolsets once for all its rollouts;
the episodes are the same as in process.

``vf-eval ID`` runs a v1 taskset through the classic engine instead (``eval_env.py``: results,
report, resume, env workers, ``--env-server``).
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

from verifiers.v1.agent import ModelContext
from verifiers.v1.cli.eval.resume import appender, owed_counts, run_dir, task_key
from verifiers.v1.configs.cli.eval import EvalConfig
from verifiers.v1.episode import Episode
from verifiers.v1.taskset import DEFAULT_SEED
from verifiers.v1.trace_parts import Error


async def run_eval(env: Any, config: EvalConfig) -> list[Episode[Any, Any, Any]]:
    """Evaluate ``env`` as ``config`` says; its episodes, task by task (a resumed run's kept
    episodes first)."""
    tasks = list(_picked(env.taskset, config))
    out = run_dir(config)
    kept, counts = owed_counts(config, [_key(task) for task in tasks])
    append = appender(out)
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
            episode = await env.run_episode(task, context)
        append(episode)
        return episode

    async with env.serving():  # shared tool servers live for the whole run
        episodes = list(
            await asyncio.gather(
                *(one(task) for task, n in zip(tasks, counts, strict=True) for _ in range(n))
            )
        )
    return kept + episodes


def _key(task: Any) -> str:
    """A task's identity in a resumed run: its wire data's content."""
    return task_key(task.data.model_dump(mode="json", exclude_none=True))


def _picked(taskset: Any, config: EvalConfig) -> Any:
    """The view of ``taskset`` the run plays: shuffled when asked, then the first
    ``num_tasks`` (upstream's order); an endless taskset needs ``num_tasks`` and cannot be
    shuffled (``Taskset.shuffle`` says so)."""
    if config.num_tasks is None and taskset.INFINITE:
        raise ValueError(f"{type(taskset).__name__} is infinite - bound the run with num_tasks")
    if config.shuffle:
        taskset = taskset.shuffle()
    if config.num_tasks is not None:
        taskset = taskset.head(config.num_tasks)
    return taskset


def _episode(env: Any, state: dict[str, Any]) -> Episode[Any, Any, Any]:
    """A worker's rollout as its episode: the one it played (its task's data and state types
    read as ``vf-eval --rescore`` reads a saved line), or (a rollout that failed outside its
    episode: its worker died, its group timed out) one with the row's error."""
    from verifiers.results.records import rebuild_error
    from verifiers.v1.eval_env import TRACE_KEY
    from verifiers.v1.rescore import read_episode

    task = env.tasks[int(state["info"]["v1_task"])]
    line = state.get(TRACE_KEY)
    if isinstance(line, str):
        return read_episode(line, task)
    episode = env.v1_env.new_episode(task)
    error = rebuild_error(state.get("error"))  # a worker's error record as its exception
    episode.errors.append(Error(type=type(error).__name__, message=str(error)))
    return episode


def _selected(count: int, config: EvalConfig) -> list[int]:
    """The indices of the tasks ``run_eval`` would run out of ``count``: ``Taskset.shuffle``'s
    order (one seeded shuffle of any list of ``count`` items is one permutation), then the
    first ``num_tasks``."""
    order = list(range(count))
    if config.shuffle:
        random.Random(DEFAULT_SEED).shuffle(order)
    return order[: config.num_tasks] if config.num_tasks is not None else order


async def run_eval_server(config: EvalConfig) -> list[Episode[Any, Any, Any]]:
    """Evaluate through a ``vf-env-server`` started on loopback for the run: the taskset's
    tasks are this process's rows (``vf.load_environment`` of the taskset id with the run's
    ``[env]`` block, as the server's workers load it), each rollout runs in a worker, and its
    episode comes back on the row; the episodes, task by task (a resumed run's kept episodes
    first). A classic env under ``[legacy]`` runs its groups in the server's workers the same
    way (``run_legacy_eval``)."""
    from verifiers.clients.config import ClientConfig
    from verifiers.errors import UsageError
    from verifiers.loading.loader import load_environment
    from verifiers.v1.cli.eval.server import env_server, worker_count
    from verifiers.v1.eval_env import TRACE_KEY
    from verifiers.workers.remote import RemoteWorkers

    if not config.client.base_url:
        raise UsageError(
            "run_eval_server needs client.base_url: the env server's workers reach the model "
            "over HTTP (the embedded model runs in process: run_eval)"
        )
    workers = worker_count(config.serve)
    key_var = config.client.api_key_var
    if config.legacy.id is not None:
        from verifiers.v1.legacy import run_legacy_eval

        if config.legacy.extra_env_kwargs:
            raise UsageError(
                "legacy.extra_env_kwargs are set on an env in this process (env.set_kwargs); "
                "the server's workers load their own: run it with run_legacy_eval"
            )
        async with env_server(config.legacy.id, config.legacy.args, workers, key_var) as served:
            remote = await RemoteWorkers([served[0]], served[1]).start()
            try:
                return await run_legacy_eval(config, env_workers=remote)
            finally:
                await remote.close()
    taskset_id = config.env.taskset.id
    # no turn cap but the config's own, as in process (vf-eval's default cap is vf-eval's)
    env_args = {"env": config.env.model_dump(mode="json"), "default_max_turns": None}
    env = load_environment(taskset_id, **env_args)
    tasks = list(_picked(env.v1_env.taskset, config))  # what run_eval refuses is refused here
    out = run_dir(config)
    kept, counts = owed_counts(config, [_key(task) for task in tasks])
    picked = env.eval_dataset.select(_selected(len(env.eval_dataset), config)).to_list()
    # each selected row once per rollout still owed: one group of them per task
    rows = [row for row, n in zip(picked, counts, strict=True) for _ in range(n)]
    append = appender(out)
    client = ClientConfig(
        api_base_url=config.client.base_url,
        api_key_var=key_var,
        extra_headers=dict(config.client.headers),
    )

    done: list[tuple[int, Episode[Any, Any, Any]]] = []

    def finished(_done: int, _total: int, records: list[dict[str, Any]]) -> None:
        for record in records:  # written as each group comes back: an interrupted run keeps it
            episode = _episode(env, record)
            append(episode)
            done.append((int(record["info"]["v1_task"]), episode))

    async with env_server(taskset_id, env_args, workers, key_var) as served:
        remote = await RemoteWorkers([served[0]], served[1]).start()
        try:
            await env.generate(
                rows,
                client,
                config.model,
                sampling_args=config.sampling.model_dump(exclude_none=True),
                max_concurrent=config.max_concurrent or -1,
                state_columns=[TRACE_KEY],
                on_progress=finished,
                env_workers=remote,
            )
        finally:
            await remote.close()
    position = {int(row["info"]["v1_task"]): i for i, row in reversed(list(enumerate(picked)))}
    done.sort(key=lambda pair: position[pair[0]])  # task by task, as run_eval returns them
    return kept + [episode for _, episode in done]
