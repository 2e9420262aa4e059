"""The rollout engine: many rollouts at bounded concurrency, scored per group, streamed to disk.

Each example's ``rollouts_per_example`` rollouts form a group. Rollouts run under one semaphore
(generation), groups are scored under another (scoring), advantages come from the final summed
reward of the group, and each finished group is appended to ``results.jsonl`` at once. Errors are
data: a rollout that fails keeps its partial completion and a typed ``state["error"]``.

Over 400 lines, not split: grouping, concurrency, scoring and streaming to disk share each
group's state; what an environment does per rollout is ``verifiers.envs.environment``'s.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol

from verifiers import classic
from verifiers.classic import Release
from verifiers.clients import ClosableModelClient, SDKClient, make_client, model_client
from verifiers.concurrency import NullAsyncContext, semaphore
from verifiers.envs.dataset_format import format_rows, to_rows
from verifiers.errors import to_record
from verifiers.messages.timing import set_scoring
from verifiers.processes.collector import collects_as_a_run
from verifiers.results.records import SummaryAccumulator, rollout_record
from verifiers.results.schema import RunMetadata, RunStatus
from verifiers.results.writer import RunWriter, now_iso
from verifiers.types import GenerateMetadata, GenerateOutputs, MessageType, State

logger = logging.getLogger("verifiers.envs.generation")


class RolloutTarget(Protocol):
    """What the rollout engine needs of an environment (``verifiers.Environment`` has it all);
    declared here so the engine never imports the environment classes."""

    env_id: str
    env_args: dict[str, Any]
    env_version: str | None
    env_content_hash: str | None
    rubric: Any
    message_type: MessageType
    system_prompt: str | None
    few_shot: list[dict[str, Any]] | None
    release: Release  # the classic release it was written for

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


async def score_states(env: RolloutTarget, states: list[State], score_sem: Any = None) -> None:
    """Score one group with the environment's rubric (or give reward 0 when the environment's
    ``score_rollouts`` is off), then add advantages: an ``@vf.advantage`` function's, else reward
    minus the group mean; then the group-stage ``@vf.update`` handlers and rubric cleanup.

    A rubric that raises (a broken subclass) leaves the rollouts with reward 0 and the error.
    An ``EnvGroup`` may hand a group to the environment its rows belong to (``env_for_group``).
    """
    pick = getattr(env, "env_for_group", None)
    if pick is not None:
        env = pick(states)
    release = getattr(env, "release", None)
    with classic.written_for(release.version if release is not None else None):
        await _score_as_release(env, states, score_sem)


async def _score_as_release(env: Any, states: list[State], score_sem: Any) -> None:
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
    if logger.isEnabledFor(logging.DEBUG):
        for state in states:
            error = state.get("error")
            logger.debug(
                "example %s rollout %s: reward %.3f, stop %s, %d turn(s)%s",
                state.get("example_id"),
                state.get("rollout_index"),
                state["reward"],
                state.get("stop_condition"),
                len(state.get("trajectory") or []),
                f", error {error['type']}: {error['message']}" if error else "",
            )


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
    """Generate and score one group (each input row is one rollout), as ``run_group`` does."""
    job = GroupJob(
        rows=list(group_inputs),
        indices=list(range(len(group_inputs))),
        sampling_args=[dict(sampling_args or {})] * len(group_inputs),
    )
    return await LocalGroups(env, client, model, gen_sem, score_sem, max_retries).run(job)


@dataclass
class GroupJob:
    """One example's rollouts, as a runner generates and scores them: each member is a row
    (the example's, once per rollout), its rollout index and its sampling args."""

    rows: list[dict[str, Any]]
    indices: list[int]
    sampling_args: list[dict[str, Any]]
    score: bool = True


def group_job(
    group: list[dict[str, Any]], rollouts_per_example: int, merged_args: dict[str, Any], score: bool
) -> GroupJob:
    """The members of one group, with per-rollout seeds when a seed is set (a fixed seed makes
    a run reproducible, not a group's rollouts identical)."""
    rows = [row for row in group for _ in range(rollouts_per_example)]
    args = []
    for index, row in enumerate(rows):
        if merged_args.get("seed") is not None:
            seed = int(merged_args["seed"]) + 7919 * int(row["example_id"]) + 104729 * index
            args.append({**merged_args, "seed": seed})
        else:
            args.append(merged_args)
    return GroupJob(rows=rows, indices=list(range(len(rows))), sampling_args=args, score=score)


class GroupRunner(Protocol):
    """Where groups run: in this process (``LocalGroups``) or in environment workers
    (``verifiers.workers``)."""

    async def run(self, job: GroupJob) -> list[State]: ...


class LocalGroups:
    """Runs groups in this process, each rollout under the generation semaphore and each group's
    scoring under the scoring one; a group whose rollouts failed for infrastructure reasons is
    rerun up to ``max_retries`` times (``verifiers.envs.retries``)."""

    def __init__(
        self,
        env: Any,
        client: Any,
        model: str,
        gen_sem: Any = None,
        score_sem: Any = None,
        max_retries: int = 0,
    ) -> None:
        from verifiers.envs.retries import maybe_retry

        self.env, self.client, self.model = env, client, model
        self.gen_sem = gen_sem or NullAsyncContext()
        self.score_sem = score_sem or NullAsyncContext()
        self._attempt = maybe_retry(self._generate, max_retries=max_retries)

    async def _one(self, row: dict[str, Any], index: int, args: dict[str, Any]) -> State:
        state = await self.env.run_rollout(self.gen_sem, row, self.client, self.model, args)
        state["rollout_index"] = index
        return state

    async def _generate(self, job: GroupJob) -> list[State]:
        members = list(zip(job.rows, job.indices, job.sampling_args, strict=True))
        if len(members) == 1:  # a group of one is awaited in place (no task and gather for it)
            states = [await self._one(*members[0])]
        else:
            states = list(await asyncio.gather(*(self._one(*member) for member in members)))
        if job.score:
            async with self.score_sem:
                await score_states(self.env, states, NullAsyncContext())
        return states

    async def run(self, job: GroupJob) -> list[State]:
        return await self._attempt(job)


def _input_groups(env: RolloutTarget, inputs: Any) -> list[list[dict[str, Any]]]:
    """Rows grouped by ``example_id`` in first-seen order (classic inputs repeat a row per rollout)."""
    rows = to_rows(inputs)
    if rows and "prompt" not in rows[0]:
        rows = format_rows(
            rows,
            message_type=env.message_type,
            system_prompt=env.system_prompt,
            few_shot=env.few_shot,
            default_task=None
            if getattr(getattr(env, "release", None), "task_is_payload", False)
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


@collects_as_a_run  # the collector's run policy, the same for every environment
async def run_generation(
    env: RolloutTarget,
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
    runner: GroupRunner | None = None,
) -> GenerateOutputs:
    from verifiers.clients.config import ClientConfig

    if rollouts_per_example < 1:
        raise ValueError(f"rollouts_per_example must be at least 1, got {rollouts_per_example}")
    groups = _input_groups(env, inputs)
    group_size = max((len(g) for g in groups), default=1) * rollouts_per_example
    made_client = None
    if isinstance(client, ClientConfig):  # one client for the whole run, closed at the end
        client = made_client = make_client(client, env.message_type)
    transport = model_client(client)
    owns_client = transport is not client and not isinstance(transport, SDKClient)
    if isinstance(client, str):
        client = transport
    meta = RunMetadata(
        env_id=env.env_id or type(env).__name__,
        env_args=env.env_args,
        env_version=env.env_version,
        env_content_hash=env.env_content_hash,
        verifiers_version=sdk_version(),
        release=str(env.release) if getattr(env, "release", None) is not None else None,
        model=model,
        base_url=str(getattr(transport, "base_url", "") or "") or None,
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
        # an environment's own per-rollout files (a v1 taskset's traces.jsonl), kept in step
        side_files = getattr(env, "rollout_files", None)
        writer = RunWriter(results_path, meta, side_files).open(group_size)
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

    merged_args = env.merge_sampling_args(sampling_args)
    if runner is None:
        runner = LocalGroups(env, client, model, gen_sem, score_sem, max_retries)

    async def run_group(group: list[dict[str, Any]]) -> None:
        states = await runner.run(
            group_job(group, rollouts_per_example, merged_args, score_rollouts)
        )
        records = [rollout_record(s, state_columns) for s in states]
        if writer is not None:
            writer.write_group(records, states)
        else:
            for record in records:
                summary.add(record)
        done_states[int(group[0]["example_id"])] = states
        progress["done"] += len(states)
        if on_progress is not None:
            on_progress(progress["done"], total, records)

    start = time.perf_counter()
    tasks = [asyncio.ensure_future(run_group(group)) for group in pending]
    status: RunStatus = "failed"
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
        describe = getattr(runner, "describe", None)
        if callable(describe):  # the workers' restarts as the run ends, not as it began
            setattr(meta, "env_workers", describe())  # noqa: B010 (an extra field)
        if writer is not None:
            writer.close(status, elapsed)
        else:
            meta.status = status
            meta.finished_at = now_iso()
            meta.duration_s = elapsed
            meta.summary = summary.summary()
        if owns_client and isinstance(transport, ClosableModelClient):
            await transport.aclose()
        if made_client is not None:
            await made_client.aclose()
        await env.end_run()
    results = _outputs(groups, done_states, meta, writer, state_columns)
    results.shape_rows_as(env.release)
    return results


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
