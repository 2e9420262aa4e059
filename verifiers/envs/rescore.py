"""Re-score a saved run with the environment as installed now, without calling the model.

``vf-eval ENV --rescore RUN_DIR`` reads the run's complete groups, rebuilds each rollout's state
from its results row (conversation, answer, info, errors, stop condition, saved state columns;
one trajectory step per assistant message; the environment's own per-rollout files, a v1
taskset's ``traces.jsonl``, under their state keys), scores every group with the environment's rubric
and saves the outcome as a new run whose metadata names its source (``rescored_from``). It then
prints what changed, so a rubric change can be checked against recorded rollouts.

The rollout engine does the rest as for any run (``run_generation`` with ``RescoreGroups`` as its
group runner): results file, metadata, summary, progress.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from verifiers.envs.generation import GroupJob, run_generation, score_states
from verifiers.envs.rollout_state import new_state
from verifiers.errors import VFError
from verifiers.messages.convert import normalize_messages
from verifiers.messages.dicts import as_messages
from verifiers.results.layout import METADATA_FILE, RESULTS_FILE
from verifiers.results.records import rebuild_error
from verifiers.results.schema import RolloutRecord, RunMetadata
from verifiers.types import GenerateOutputs, State

RECORD_KEYS = frozenset(RolloutRecord.model_fields)


class RescoreError(VFError, ValueError):
    """The run directory cannot be re-scored (no results, nothing complete)."""


@dataclass
class SavedRun:
    run_dir: Path
    metadata: RunMetadata
    records: dict[tuple[int, int], dict[str, Any]]  # (example_id, rollout_index) -> row
    example_ids: list[int]  # of the complete groups, in file order
    # an environment's own per-rollout files (``Environment.rollout_files``): state key ->
    # (example_id, rollout_index) -> the line's JSON object, its key left out
    side: dict[str, dict[tuple[int, int], str]] = field(default_factory=dict)

    @classmethod
    def read(cls, run_dir: str | Path, side_files: Mapping[str, str] | None = None) -> SavedRun:
        """The run in ``run_dir``; ``side_files`` (the environment's ``rollout_files``) are
        read too, and one that the run lacks is a ``RescoreError`` naming it."""
        from verifiers.results import read_rows

        run_dir = Path(run_dir)
        if not (run_dir / METADATA_FILE).exists() or not (run_dir / RESULTS_FILE).exists():
            raise RescoreError(
                f"{run_dir} has no {METADATA_FILE} and {RESULTS_FILE}; pass a run directory "
                "written by vf-eval (outputs/evals/<env>--<model>/<run>)"
            )
        metadata = RunMetadata.model_validate_json((run_dir / METADATA_FILE).read_bytes())
        records: dict[tuple[int, int], dict[str, Any]] = {}
        order: list[int] = []
        for row in read_rows(run_dir / RESULTS_FILE):
            key = (int(row["example_id"]), int(row["rollout_index"]))
            records[key] = row
            if key[0] not in order:
                order.append(key[0])
        r = metadata.rollouts_per_example
        complete = [e for e in order if all((e, i) in records for i in range(r))]
        if not complete:
            raise RescoreError(f"{run_dir} has no complete group of {r} rollouts to re-score")
        side = {key: _side_lines(run_dir / name) for key, name in (side_files or {}).items()}
        return cls(run_dir, metadata, records, complete, side)

    def inputs(self, env: Any) -> list[dict[str, Any]]:
        """One dataset row per complete example, as the run saw it."""
        return [_row(env, self.records[(example_id, 0)]) for example_id in self.example_ids]


def _side_lines(path: Path) -> dict[tuple[int, int], str]:
    """A side file's lines by rollout, each without its key (as the state held it)."""
    if not path.is_file():
        raise RescoreError(
            f"{path.parent} has no {path.name}: this environment's rollouts are re-scored from "
            f"it (the run's rollouts as it recorded them)"
        )
    lines: dict[tuple[int, int], str] = {}
    with path.open("rb") as f:
        for line in f:
            try:
                data = orjson.loads(line)
                key = (int(data.pop("example_id")), int(data.pop("rollout_index")))
            except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError):
                continue  # a torn last line: its rollout is not in results.jsonl either
            lines.setdefault(key, orjson.dumps(data).decode())
    return lines


def _row(env: Any, record: dict[str, Any]) -> dict[str, Any]:
    """The dataset row behind a results row. Its ``task`` is kept when it is a name; a payload
    (verifiers 0.1.14+) is not saved as one and is left out."""
    row = {
        "prompt": record["prompt"],
        "answer": record.get("answer", ""),
        "info": record.get("info") or {},
        "example_id": int(record["example_id"]),
    }
    if not getattr(env.release, "task_is_payload", False):
        row["task"] = record.get("task", "default")
    elif isinstance(record.get("task"), str):  # a task name (accepted in every release)
        row["task"] = record["task"]
    return row


def _steps(prompt: Any, completion: Any) -> list[dict[str, Any]]:
    """One trajectory step per model reply (no tokens: the run saved messages only)."""
    if not isinstance(completion, list):
        return [{"prompt": prompt, "completion": completion, "response": None, "tokens": None}]
    steps: list[dict[str, Any]] = []
    for i, message in enumerate(completion):
        if message.get("role") == "assistant":
            steps.append(
                {
                    "prompt": [*prompt, *completion[:i]],
                    "completion": [message],
                    "response": None,
                    "tokens": None,
                }
            )
    for step in steps:
        step.update(reward=None, advantage=None, is_truncated=False, trajectory_id="", extras={})
    return steps


def state_from_record(
    env: Any,
    record: dict[str, Any],
    metadata: RunMetadata,
    side: Mapping[str, Mapping[tuple[int, int], str]] | None = None,
) -> State:
    """The finished state a results row describes, in the environment's message form, with
    the rollout's lines of the environment's own files (``side``) under their state keys."""
    state = new_state(env, _row(env, record), None, metadata.model, dict(metadata.sampling_args))
    typed = env.release.typed_messages
    completion = record.get("completion")
    if isinstance(completion, list):
        completion = (
            normalize_messages(completion, field_name="completion")
            if typed
            else as_messages(completion)
        )
    state["completion"] = completion
    state["trajectory"] = _steps(state["prompt"], completion)
    state["rollout_index"] = int(record["rollout_index"])
    state["is_completed"] = True
    state["is_truncated"] = bool(record.get("is_truncated"))
    state["stop_condition"] = record.get("stop_condition")
    state["error"] = rebuild_error(record.get("error"))
    if isinstance(record.get("usage"), dict):
        state["usage"] = dict(record["usage"])
    if not typed:
        state["turn"] = int(record.get("turns") or len(state["trajectory"]))
    for key, value in record.items():  # state columns the run saved (-C)
        if key not in RECORD_KEYS:
            state[key] = value
    rollout = (int(record["example_id"]), int(record["rollout_index"]))
    for state_key, lines in (side or {}).items():
        if rollout in lines:
            state[state_key] = lines[rollout]
    state["rescored"] = True
    return state


class RescoreGroups:
    """A ``GroupRunner`` that scores recorded rollouts instead of generating new ones."""

    def __init__(self, env: Any, run: SavedRun) -> None:
        self.env, self.run_ = env, run

    async def run(self, job: GroupJob) -> list[State]:
        example_id = int(job.rows[0]["example_id"])
        states = [
            state_from_record(
                self.env,
                self.run_.records[(example_id, i)],
                self.run_.metadata,
                self.run_.side,
            )
            for i in job.indices
        ]
        if job.score:
            await score_states(self.env, states)
        return states


async def rescore(
    env: Any,
    run: SavedRun,
    results_path: str | None,
    on_progress: Any = None,
) -> GenerateOutputs:
    """Score ``run``'s complete groups with ``env``; saved to ``results_path`` if given."""
    meta = run.metadata
    return await run_generation(
        env,
        run.inputs(env),
        meta.base_url or "http://rescored.invalid/v1",  # never called
        meta.model,
        sampling_args=dict(meta.sampling_args),
        rollouts_per_example=meta.rollouts_per_example,
        results_path=results_path,
        on_progress=on_progress,
        metadata={
            "rescored_from": str(run.run_dir),
            "rescored_from_run_id": meta.run_id,
            "rescored_from_env_version": meta.env_version,
        },
        runner=RescoreGroups(env, run),
    )


@dataclass
class Changes:
    """What re-scoring changed: rewards per rollout, metric means, and per example."""

    rollouts: int = 0
    changed: int = 0
    old_mean: float = 0.0
    new_mean: float = 0.0
    metrics: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    examples: list[tuple[int, float, float]] = field(default_factory=list)  # changed ones


def compare(run: SavedRun, out: GenerateOutputs, tolerance: float = 1e-9) -> Changes:
    changes = Changes()
    old_rewards, new_rewards = [], []
    old_metrics: dict[str, list[float]] = {}
    new_metrics: dict[str, list[float]] = {}
    per_example: dict[int, tuple[list[float], list[float]]] = {}
    for state in out.state:
        key = (int(state["example_id"]), int(state["rollout_index"]))
        before = run.records[key]
        old, new = float(before.get("reward") or 0.0), float(state.get("reward") or 0.0)
        old_rewards.append(old)
        new_rewards.append(new)
        changes.changed += abs(old - new) > tolerance
        olds, news = per_example.setdefault(key[0], ([], []))
        olds.append(old)
        news.append(new)
        for name, value in (before.get("metrics") or {}).items():
            old_metrics.setdefault(name, []).append(float(value))
        for name, value in (state.get("metrics") or {}).items():
            new_metrics.setdefault(name, []).append(float(value))
    changes.rollouts = len(out.state)
    changes.old_mean = statistics.fmean(old_rewards) if old_rewards else 0.0
    changes.new_mean = statistics.fmean(new_rewards) if new_rewards else 0.0
    for name in [*old_metrics, *(n for n in new_metrics if n not in old_metrics)]:
        changes.metrics[name] = (
            statistics.fmean(old_metrics[name]) if name in old_metrics else None,
            statistics.fmean(new_metrics[name]) if name in new_metrics else None,
        )
    for example_id, (olds, news) in per_example.items():
        old, new = statistics.fmean(olds), statistics.fmean(news)
        if abs(old - new) > tolerance:
            changes.examples.append((example_id, old, new))
    return changes


def changes_table(changes: Changes, limit: int = 20) -> Any:
    """A rich table of the changes (the first ``limit`` changed examples)."""
    from rich.table import Table

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.4f}"

    table = Table(
        title=f"re-scored {changes.rollouts} rollouts: reward changed on {changes.changed}",
        title_justify="left",
    )
    for column in ("", "recorded", "now", "change"):
        table.add_column(column, justify="left" if not column else "right")
    table.add_row(
        "reward (mean)",
        fmt(changes.old_mean),
        fmt(changes.new_mean),
        f"{changes.new_mean - changes.old_mean:+.4f}",
    )
    for name, (old, new) in changes.metrics.items():
        delta = "-" if old is None or new is None else f"{new - old:+.4f}"
        table.add_row(f"  {name}", fmt(old), fmt(new), delta)
    for example_id, old, new in changes.examples[:limit]:
        table.add_row(f"example {example_id}", fmt(old), fmt(new), f"{new - old:+.4f}")
    if len(changes.examples) > limit:
        table.add_row(f"... {len(changes.examples) - limit} more examples changed", "", "", "")
    return table
