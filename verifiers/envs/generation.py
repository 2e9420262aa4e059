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
from typing import TYPE_CHECKING, Any

from verifiers.clients import resolve_client
from verifiers.envs.dataset_format import format_rows, to_rows
from verifiers.errors import to_record
from verifiers.results.records import rollout_record
from verifiers.results.schema import RunMetadata
from verifiers.results.writer import RunWriter, now_iso
from verifiers.types import GenerateOutputs, State

if TYPE_CHECKING:
    from verifiers.envs.environment import Environment

ProgressCallback = Callable[[int, int, list[dict[str, Any]]], Any]


def sdk_version() -> str:
    try:
        return version("verifiers")
    except PackageNotFoundError:
        return "0+unknown"


def group_advantages(rewards: list[float]) -> list[float]:
    """Reward minus the group mean: the baseline every GRPO-style estimator starts from."""
    mean = statistics.fmean(rewards) if rewards else 0.0
    return [r - mean for r in rewards]


def _input_rows(env: Environment, inputs: Any) -> list[dict[str, Any]]:
    rows = to_rows(inputs)
    if rows and "prompt" not in rows[0]:
        rows = format_rows(
            rows,
            message_type=env.message_type,
            system_prompt=env.system_prompt,
            few_shot=env.few_shot,
        )
    elif rows and "example_id" not in rows[0]:
        rows = [dict(r, example_id=i) for i, r in enumerate(rows)]
    return rows


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
    max_concurrent: int = -1,
    max_concurrent_scoring: int = -1,
    score_rollouts: bool = True,
    results_path: str | None = None,
    state_columns: list[str] | None = None,
    on_progress: ProgressCallback | None = None,
    metadata: dict[str, Any] | None = None,
) -> GenerateOutputs:
    if rollouts_per_example < 1:
        raise ValueError(f"rollouts_per_example must be at least 1, got {rollouts_per_example}")
    rows = _input_rows(env, inputs)
    model_client = resolve_client(client)
    owns_client = model_client is not client  # built here from a URL or an openai client
    if isinstance(client, str):
        client = model_client
    writer: RunWriter | None = None
    if results_path is not None:
        meta = RunMetadata(
            env_id=env.env_id or type(env).__name__,
            env_args=env.env_args,
            env_version=getattr(env, "env_version", None),
            env_content_hash=getattr(env, "env_content_hash", None),
            verifiers_version=sdk_version(),
            model=model,
            base_url=str(getattr(model_client, "base_url", "") or "") or None,
            sampling_args=_json_safe(env.merge_sampling_args(sampling_args)),
            num_examples=len(rows),
            rollouts_per_example=rollouts_per_example,
            max_concurrent=max_concurrent,
            started_at=now_iso(),
            **{
                k: v
                for k, v in {**env.run_metadata(), **(metadata or {})}.items()
                if k not in RunMetadata.model_fields
            },
        )
        writer = RunWriter(results_path, meta).open(rollouts_per_example)

    done_states: dict[int, list[State]] = {}
    if writer is not None:
        for row in writer.previous_rows:
            done_states.setdefault(int(row["example_id"]), []).append(_state_from_row(row))
    pending = [
        r for r in rows if writer is None or int(r["example_id"]) not in writer.completed_ids
    ]
    total = len(rows) * rollouts_per_example
    progress = {"done": total - len(pending) * rollouts_per_example}
    gen_sem = asyncio.Semaphore(max_concurrent if max_concurrent > 0 else 1 << 30)
    score_sem = asyncio.Semaphore(max_concurrent_scoring if max_concurrent_scoring > 0 else 1 << 30)

    async def run_one(row: dict[str, Any], index: int) -> State:
        args = sampling_args
        if sampling_args and sampling_args.get("seed") is not None:
            # a fixed seed makes runs reproducible, not a group's rollouts identical
            args = {
                **sampling_args,
                "seed": int(sampling_args["seed"]) + 7919 * int(row["example_id"]) + 104729 * index,
            }
        async with gen_sem:
            try:
                state = await env.rollout(dict(row), client, model, args)
            except Exception as exc:  # a rollout override that raised instead of recording
                state = env.init_state(dict(row), client, model, args)
                state["error"] = to_record(exc, phase="rollout")
                state["stop_condition"] = "has_error"
        state["rollout_index"] = index
        return state

    async def run_group(row: dict[str, Any]) -> None:
        states = list(await asyncio.gather(*(run_one(row, i) for i in range(rollouts_per_example))))
        if score_rollouts:
            async with score_sem:
                try:
                    await env.rubric.score_group(states)
                except Exception as exc:  # a broken rubric subclass: keep the rollouts, reward 0
                    for state in states:
                        state["reward"], state["metrics"] = 0.0, {}
                        state.setdefault("reward_errors", []).append(
                            to_record(exc, phase="scoring")
                        )
            for state, advantage in zip(
                states, group_advantages([s["reward"] or 0.0 for s in states]), strict=True
            ):
                state["advantage"] = advantage
                for step in state.get("trajectory") or []:
                    step["reward"], step["advantage"] = state["reward"], advantage
        records = [rollout_record(s, state_columns) for s in states]
        if writer is not None:
            writer.write_group(records)
        done_states[int(row["example_id"])] = states
        progress["done"] += len(states)
        if on_progress is not None:
            on_progress(progress["done"], total, records)

    start = time.perf_counter()
    tasks = [asyncio.ensure_future(run_group(row)) for row in pending]
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
        if writer is not None:
            writer.close(status, time.perf_counter() - start)
        if owns_client:
            await model_client.aclose()
        await env.end_run()
    return _outputs(rows, done_states, writer)


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


def _outputs(
    rows: list[dict[str, Any]], done: dict[int, list[State]], writer: RunWriter | None
) -> GenerateOutputs:
    out = GenerateOutputs()
    metric_names: list[str] = []
    for row in rows:
        for state in sorted(
            done.get(int(row["example_id"]), []), key=lambda s: s.get("rollout_index", 0)
        ):
            out.prompt.append(state["prompt"])
            out.completion.append(state.get("completion"))
            out.answer.append(state.get("answer", ""))
            out.state.append(state)
            out.task.append(state.get("task", "default"))
            out.info.append(state.get("info") or {})
            out.example_id.append(state["example_id"])
            out.reward.append(state.get("reward") or 0.0)
            for name in state.get("metrics") or {}:
                if name not in metric_names:
                    metric_names.append(name)
    out.metrics = {
        name: [(s.get("metrics") or {}).get(name, 0.0) for s in out.state] for name in metric_names
    }
    if writer is not None:
        out.metadata = writer.metadata
        out.path = str(writer.run_dir)
    return out
