"""The rollout engine: many rollouts at bounded concurrency, scored per group, streamed to disk.

Each example's ``rollouts_per_example`` rollouts form a group. Rollouts run under one semaphore
(generation), groups are scored under another (scoring), advantages come from the final summed
reward of the group, and each finished group is appended to ``results.jsonl`` at once. Errors are
data: a rollout that fails keeps its partial completion and a typed ``state["error"]``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol

from verifiers.clients import SDKClient, make_client, resolve_client
from verifiers.concurrency import NullAsyncContext, semaphore
from verifiers.envs.dataset_format import format_rows, to_rows
from verifiers.envs.timing import set_scoring
from verifiers.errors import to_record
from verifiers.results.records import SummaryAccumulator, rollout_record
from verifiers.results.schema import RunMetadata
from verifiers.results.writer import RunWriter, now_iso
from verifiers.types import GenerateMetadata, GenerateOutputs, State


class Environment(Protocol):
    """What the rollout engine needs of an environment (``verifiers.Environment`` has it all);
    declared here so the engine never imports the environment classes."""

    env_id: str
    env_args: dict[str, Any]
    env_version: str | None
    env_content_hash: str | None
    rubric: Any
    message_type: str
    system_prompt: str | None
    few_shot: list[dict[str, Any]] | None

    def merge_sampling_args(self, sampling_args: dict[str, Any] | None) -> dict[str, Any]: ...
    def run_metadata(self) -> dict[str, Any]: ...
    async def run_rollout(
        self, sem: Any, input: Any, client: Any, model: str, sampling_args: Any
    ) -> State: ...
    async def end_run(self) -> None: ...


ProgressCallback = Callable[[int, int, list[dict[str, Any]]], Any]


def sdk_version() -> str:
    try:
        return version("verifiers")
    except PackageNotFoundError:
        return "0+unknown"


def group_advantages(rewards: list[float]) -> list[float]:
    """Reward minus the group mean: the baseline every GRPO-style estimator starts from.

    The one place advantages of a generate run are computed, always from the final summed reward.
    """
    mean = statistics.fmean(rewards) if rewards else 0.0
    return [r - mean for r in rewards]


async def score_states(env: Environment, states: list[State], score_sem: Any = None) -> None:
    """Score one group with the environment's rubric (or give reward 0 when the environment's
    ``score_rollouts`` is off), then add advantages: an ``@vf.advantage`` function's, else reward
    minus the group mean; then the group-stage ``@vf.update`` handlers and rubric cleanup.

    A rubric that raises (a broken subclass) leaves the rollouts with reward 0 and the error.
    """
    started = time.time()
    try:
        if getattr(env, "score_rollouts", True):
            await env.rubric.score_group(states, score_sem=score_sem or NullAsyncContext())
        else:
            for state in states:
                state["reward"], state["metrics"] = 0.0, {}
    except Exception as exc:
        for state in states:
            state["reward"], state["metrics"] = 0.0, {}
            state.setdefault("reward_errors", []).append(to_record(exc, phase="scoring"))
    ended = time.time()
    for state in states:
        set_scoring(state.get("timing"), started, ended)
    rewards = [float(s.get("reward") or 0.0) for s in states]
    advantages = group_advantages(rewards)
    compute = getattr(env, "compute_advantages", None)
    if compute is not None:
        try:
            advantages = (await compute(states)) or advantages
        except Exception as exc:
            for state in states:
                state.setdefault("reward_errors", []).append(to_record(exc, phase="advantage"))
    for state, advantage in zip(states, advantages, strict=True):
        state["reward"] = float(state.get("reward") or 0.0)
        state["advantage"] = advantage
        if state.get("metrics") is None:
            state["metrics"] = {}
        for step in state.get("trajectory") or []:
            if step.get("reward") is None:
                step["reward"] = state["reward"]
            if step.get("advantage") is None:
                step["advantage"] = advantage
    await _after_scoring(env, states)


async def _after_scoring(env: Any, states: list[State]) -> None:
    """Group-stage updates, then each rollout's rubric cleanup; failures are recorded."""
    updates = getattr(env, "run_updates", None)
    if updates is not None and getattr(env, "_group_updates", None):
        try:
            await updates(states, "group")
        except Exception as exc:
            for state in states:
                state.setdefault("reward_errors", []).append(to_record(exc, phase="update"))
    cleanup = getattr(env.rubric, "cleanup", None)
    if cleanup is None:
        return
    for state in states:
        try:
            await cleanup(state)
        except Exception as exc:
            state.setdefault("cleanup_errors", []).append(
                f"rubric cleanup: {type(exc).__name__}: {exc}"
            )


async def run_group_states(
    env: Any,
    group_inputs: list[dict[str, Any]],
    client: Any,
    model: str,
    sampling_args: dict[str, Any] | None,
    *,
    gen_sem: Any = None,
    score_sem: Any = None,
    max_retries: int = 0,
) -> list[State]:
    """Generate and score one group (the rollouts of one example), rerunning the whole group
    while a rollout ended with a retryable error (``verifiers.envs.retries``)."""
    from verifiers.envs.retries import maybe_retry

    gen_sem = gen_sem or NullAsyncContext()

    async def attempt() -> list[State]:
        states = list(
            await asyncio.gather(
                *(
                    env.run_rollout(gen_sem, row, client, model, sampling_args)
                    for row in group_inputs
                )
            )
        )
        await score_states(env, states, score_sem)
        return states

    return await maybe_retry(attempt, max_retries=max_retries)()


def _input_groups(env: Environment, inputs: Any) -> list[list[dict[str, Any]]]:
    """Rows grouped by ``example_id`` in first-seen order (classic inputs repeat a row per rollout)."""
    rows = to_rows(inputs)
    if rows and "prompt" not in rows[0]:
        rows = format_rows(
            rows,
            message_type=env.message_type,
            system_prompt=env.system_prompt,
            few_shot=env.few_shot,
            default_task=None
            if getattr(getattr(env, "release", None), "refuses_string_task", False)
            else (env.env_id or "default"),
        )
    groups: dict[int, list[dict[str, Any]]] = {}
    for i, row in enumerate(rows):
        example_id = row.get("example_id")
        if example_id is None:
            row = dict(row, example_id=i)
            example_id = i
        groups.setdefault(int(example_id), []).append(row)
    return list(groups.values())


def _json_safe(args: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in args.items()
        if isinstance(v, str | int | float | bool | list | dict | type(None))
    }


async def run_generation(
    env: Environment,
    inputs: Any,
    client: Any,
    model: str,
    *,
    sampling_args: dict[str, Any] | None = None,
    rollouts_per_example: int = 1,
    max_concurrent: int | None = -1,
    max_concurrent_scoring: int | None = -1,
    score_rollouts: bool = True,
    results_path: str | None = None,
    state_columns: list[str] | None = None,
    on_progress: ProgressCallback | None = None,
    metadata: dict[str, Any] | None = None,
    use_tqdm: bool = False,
    max_retries: int = 0,
) -> GenerateOutputs:
    from verifiers.clients.config import ClientConfig
    from verifiers.envs.retries import maybe_retry

    if rollouts_per_example < 1:
        raise ValueError(f"rollouts_per_example must be at least 1, got {rollouts_per_example}")
    groups = _input_groups(env, inputs)
    group_size = max((len(g) for g in groups), default=1) * rollouts_per_example
    made_client = None
    if isinstance(client, ClientConfig):  # one client for the whole run, closed at the end
        client = made_client = make_client(client, env.message_type)
    model_client = resolve_client(client)
    owns_client = model_client is not client and not isinstance(model_client, SDKClient)
    if isinstance(client, str):
        client = model_client
    meta = RunMetadata(
        env_id=env.env_id or type(env).__name__,
        env_args=env.env_args,
        env_version=env.env_version,
        env_content_hash=env.env_content_hash,
        verifiers_version=sdk_version(),
        model=model,
        base_url=str(getattr(model_client, "base_url", "") or "") or None,
        sampling_args=_json_safe(env.merge_sampling_args(sampling_args)),
        num_examples=len(groups),
        rollouts_per_example=group_size,
        max_concurrent=max_concurrent if max_concurrent is not None else -1,
        started_at=now_iso(),
        **{
            k: v
            for k, v in {**env.run_metadata(), **(metadata or {})}.items()
            if k not in RunMetadata.model_fields
        },
    )
    writer: RunWriter | None = None
    summary = SummaryAccumulator()
    if results_path is not None:
        writer = RunWriter(results_path, meta).open(group_size)
        summary = writer.summary
    summary.pass_threshold = float(getattr(env, "pass_threshold", 0.5))

    done_states: dict[int, list[State]] = {}
    if writer is not None:
        for row in writer.previous_rows:
            done_states.setdefault(int(row["example_id"]), []).append(_state_from_row(row))
    pending = [
        g for g in groups if writer is None or int(g[0]["example_id"]) not in writer.completed_ids
    ]
    total = len(groups) * group_size
    progress = {"done": total - len(pending) * group_size}
    gen_sem = semaphore(max_concurrent)
    score_sem = semaphore(max_concurrent_scoring)

    def rollout_args(row: dict[str, Any], index: int) -> dict[str, Any] | None:
        if sampling_args and sampling_args.get("seed") is not None:
            # a fixed seed makes runs reproducible, not a group's rollouts identical
            seed = int(sampling_args["seed"]) + 7919 * int(row["example_id"]) + 104729 * index
            return {**sampling_args, "seed": seed}
        return sampling_args

    async def run_one(row: dict[str, Any], index: int) -> State:
        state = await env.run_rollout(gen_sem, row, client, model, rollout_args(row, index))
        state["rollout_index"] = index
        return state

    async def attempt(members: list[dict[str, Any]]) -> list[State]:
        states = list(await asyncio.gather(*(run_one(r, i) for i, r in enumerate(members))))
        if score_rollouts:
            async with score_sem:
                await score_states(env, states, NullAsyncContext())
        return states

    generate_group = maybe_retry(attempt, max_retries=max_retries)

    async def run_group(group: list[dict[str, Any]]) -> None:
        members = [row for row in group for _ in range(rollouts_per_example)]
        states = await generate_group(members)
        records = [rollout_record(s, state_columns) for s in states]
        if writer is not None:
            writer.write_group(records)
        else:
            for record in records:
                summary.add(record)
        done_states[int(group[0]["example_id"])] = states
        progress["done"] += len(states)
        if on_progress is not None:
            on_progress(progress["done"], total, records)

    start = time.perf_counter()
    tasks = [asyncio.ensure_future(run_group(group)) for group in pending]
    status = "failed"
    try:
        await asyncio.gather(*tasks)
        status = "completed"
    except (asyncio.CancelledError, KeyboardInterrupt):
        status = "interrupted"
        raise
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        elapsed = time.perf_counter() - start
        if writer is not None:
            writer.close(status, elapsed)
        else:
            meta.status = status  # type: ignore[assignment]
            meta.finished_at = now_iso()
            meta.duration_s = elapsed
            meta.summary = summary.summary()
        if owns_client:
            await model_client.aclose()
        if made_client is not None:
            await made_client.aclose()
        await env.end_run()
    return _outputs(groups, done_states, meta, writer, state_columns)


def _state_from_row(row: dict[str, Any]) -> State:
    state = State(
        input={k: row.get(k) for k in ("prompt", "answer", "info", "task", "example_id")},
        **{
            k: v
            for k, v in row.items()
            if k not in ("prompt", "answer", "info", "task", "example_id")
        },
    )
    dict.__setitem__(state, "turn", row.get("turns", 0))
    return state


def classic_metadata(
    meta: RunMetadata, run_dir: str | None, state_columns: list[str] | None
) -> GenerateMetadata:
    """The run's metadata under both the classic keys and ``RunMetadata``'s own fields."""
    summary = meta.summary
    out = GenerateMetadata(meta.model_dump())
    out.update(
        date=meta.started_at,
        time=meta.duration_s,
        time_ms=meta.duration_s * 1000.0,
        avg_reward=summary.avg_reward if summary.avg_reward is not None else 0.0,
        avg_metrics=dict(summary.avg_metrics),
        avg_error=(summary.num_errors / summary.num_rollouts) if summary.num_rollouts else 0.0,
        pass_at_k=dict(summary.pass_at_k),
        pass_all_k=dict(summary.pass_all_k),
        pass_threshold=summary.pass_threshold,
        usage={
            "input_tokens": float(summary.usage.prompt_tokens),
            "output_tokens": float(summary.usage.completion_tokens),
        },
        version_info={
            "vf_version": meta.verifiers_version,
            "vf_commit": None,
            "env_version": meta.env_version,
            "env_commit": None,
        },
        state_columns=list(state_columns or []),
        path_to_save=Path(run_dir) if run_dir else None,
        base_url=meta.base_url or "",
    )
    return out


def _outputs(
    groups: list[list[dict[str, Any]]],
    done: dict[int, list[State]],
    meta: RunMetadata,
    writer: RunWriter | None,
    state_columns: list[str] | None,
) -> GenerateOutputs:
    out = GenerateOutputs()
    metric_names: list[str] = []
    for group in groups:
        for state in sorted(
            done.get(int(group[0]["example_id"]), []), key=lambda s: s.get("rollout_index", 0)
        ):
            out["prompt"].append(state["prompt"])
            out["completion"].append(state.get("completion"))
            out["answer"].append(state.get("answer", ""))
            out["state"].append(state)
            out["task"].append(state.get("task", "default"))
            out["info"].append(state.get("info") or {})
            out["example_id"].append(state["example_id"])
            out["reward"].append(state.get("reward") or 0.0)
            for name in state.get("metrics") or {}:
                if name not in metric_names:
                    metric_names.append(name)
    out["metrics"] = {
        name: [(s.get("metrics") or {}).get(name, 0.0) for s in out["state"]]
        for name in metric_names
    }
    run_dir = str(writer.run_dir) if writer is not None else None
    out["metadata"] = classic_metadata(meta, run_dir, state_columns)
    out["run_metadata"] = meta
    out["path"] = run_dir
    return out
