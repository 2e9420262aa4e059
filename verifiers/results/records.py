"""Rollout state → results row, and the run summary computed from rows."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any

import orjson

from verifiers import errors
from verifiers.errors import to_record
from verifiers.messages.convert import to_plain
from verifiers.messages.timing import milliseconds
from verifiers.results.schema import RunSummary, Usage
from verifiers.types import State

# State keys never written by default: live objects, or bulk that the trajectory already holds.
_DEFAULT_EXCLUDED = frozenset({"client", "responses", "input", "trajectory"})


def _default(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(exclude_none=True)
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    return repr(obj)


def dumps_line(record: dict[str, Any]) -> bytes:
    return (
        orjson.dumps(
            record, default=_default, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
        )
        + b"\n"
    )


def record_usage(usage: Any) -> dict[str, int]:
    """Token counts under this file's names, from either era's state (``prompt_tokens`` or
    ``input_tokens``)."""
    if not isinstance(usage, dict):
        return {"prompt_tokens": 0, "completion_tokens": 0}
    return {
        "prompt_tokens": int(usage.get("prompt_tokens", usage.get("input_tokens", 0)) or 0),
        "completion_tokens": int(
            usage.get("completion_tokens", usage.get("output_tokens", 0)) or 0
        ),
    }


def rollout_record(state: State, state_columns: list[str] | None = None) -> dict[str, Any]:
    """The results row for one scored rollout (see ``RolloutRecord``). Messages are saved in
    OpenAI's shape whichever form the environment used (typed messages become dicts)."""
    task = state.get("task", "default")
    record = {
        "example_id": state["example_id"],
        "rollout_index": state.get("rollout_index", 0),
        "prompt": to_plain(state["prompt"]),
        "completion": to_plain(state.get("completion")),
        "answer": state.get("answer", ""),
        "info": state.get("info") or {},
        "task": task if isinstance(task, str) else "default",
        "reward": state.get("reward") or 0.0,
        "advantage": state.get("advantage"),
        "metrics": state.get("metrics") or {},
        "error": to_record(state["error"]) if state.get("error") is not None else None,
        "reward_errors": state.get("reward_errors") or [],
        "stop_condition": state.get("stop_condition"),
        "turns": len(state.get("trajectory") or []) or state.get("turn", 0),
        "is_truncated": bool(state.get("is_truncated")),
        "timing": milliseconds(state.get("timing")),
        "usage": record_usage(state.get("usage")),
    }
    for column in state_columns or []:
        if column in _DEFAULT_EXCLUDED and column != "trajectory":
            continue
        if column in state and column not in record:
            record[column] = state[column]
    return record


class SummaryAccumulator:
    """Keeps just the numbers a summary needs, so memory stays flat however long the run."""

    def __init__(self, pass_threshold: float = 0.5) -> None:
        self.pass_threshold = pass_threshold
        self.rewards: list[float] = []
        self.example_ids: list[int] = []
        self.metrics: dict[str, list[float]] = {}
        self.errors: Counter[str] = Counter()
        self.reward_errors: Counter[str] = Counter()
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.generation_ms = 0.0
        self.scoring_ms = 0.0

    def add(self, record: dict[str, Any]) -> None:
        self.rewards.append(float(record.get("reward") or 0.0))
        self.example_ids.append(int(record["example_id"]))
        for name, value in (record.get("metrics") or {}).items():
            self.metrics.setdefault(name, []).append(float(value))
        error = record.get("error")
        if error:
            self.errors[error.get("type", "Error")] += 1
        for reward_error in record.get("reward_errors") or []:
            self.reward_errors[reward_error.get("function", "?")] += 1
        usage = record.get("usage") or {}
        self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.completion_tokens += int(usage.get("completion_tokens") or 0)
        timing = record.get("timing") or {}
        self.generation_ms += float(timing.get("generation_ms") or 0.0)
        self.scoring_ms += float(timing.get("scoring_ms") or 0.0)

    def summary(self) -> RunSummary:
        n = len(self.rewards)
        if not n:
            return RunSummary()
        return RunSummary(
            num_rollouts=n,
            num_examples=len(set(self.example_ids)),
            num_errors=sum(self.errors.values()),
            avg_reward=statistics.fmean(self.rewards),
            std_reward=statistics.pstdev(self.rewards) if n > 1 else 0.0,
            avg_metrics={k: statistics.fmean(v) for k, v in self.metrics.items() if v},
            pass_at_k=pass_at_k(self.example_ids, self.rewards, self.pass_threshold),
            pass_all_k=pass_all_k(self.example_ids, self.rewards, self.pass_threshold),
            pass_threshold=self.pass_threshold,
            errors_by_type=dict(self.errors),
            reward_errors_by_function=dict(self.reward_errors),
            usage=Usage(prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens),
            avg_generation_ms=self.generation_ms / n,
            avg_scoring_ms=self.scoring_ms / n,
        )


def _per_example(
    example_ids: list[int], rewards: list[float], threshold: float
) -> dict[int, list[bool]]:
    per_example: dict[int, list[bool]] = {}
    for example_id, reward in zip(example_ids, rewards, strict=True):
        per_example.setdefault(example_id, []).append(reward >= threshold)
    return per_example


def _k_values(per_example: dict[int, list[bool]]) -> list[int]:
    n_min = min((len(v) for v in per_example.values()), default=0)
    ks, k = [], 1
    while k <= n_min:
        ks.append(k)
        k *= 2
    return ks


def pass_at_k(
    example_ids: list[int], rewards: list[float], threshold: float = 0.5
) -> dict[str, float]:
    """Unbiased pass@k (Chen et al. 2021: at least one of k rollouts succeeds) for k = 1, 2,
    4, ... up to the rollouts per example; a rollout succeeds when its reward reaches
    ``threshold``."""
    per_example = _per_example(example_ids, rewards, threshold)
    result: dict[str, float] = {}
    for k in _k_values(per_example):
        estimates = []
        for values in per_example.values():
            n, c = len(values), sum(values)
            estimates.append(1.0 if n - c < k else 1.0 - math.comb(n - c, k) / math.comb(n, k))
        result[str(k)] = statistics.fmean(estimates)
    return result


def pass_all_k(
    example_ids: list[int], rewards: list[float], threshold: float = 0.5
) -> dict[str, float]:
    """Unbiased pass^k (all of k rollouts succeed: C(c, k) / C(n, k)), same k values."""
    per_example = _per_example(example_ids, rewards, threshold)
    return {
        str(k): statistics.fmean(
            math.comb(sum(v), k) / math.comb(len(v), k) for v in per_example.values()
        )
        for k in _k_values(per_example)
    }


def columns_dataset(
    results: Any,
    state_columns: list[str] | None = None,
    push_to_hub: bool = False,
    hub_name: str | None = None,
    **kwargs: Any,
) -> Any:
    """A ``datasets.Dataset`` with one row per rollout of ``results`` (a ``GenerateOutputs``).

    Columns: prompt, completion, answer, task, info, example_id, reward, each metric, and the
    state columns named in ``state_columns`` (default: the metadata's ``state_columns``).
    """
    from datasets import Dataset

    if push_to_hub or hub_name:
        raise ValueError(
            "make_dataset does not upload to the Hugging Face Hub (no network at runtime); "
            "save the dataset with dataset.save_to_disk(...) or attach it to the hub's version"
        )
    metadata = results.get("metadata") or {}
    columns = list(state_columns or metadata.get("state_columns") or [])
    n = len(results["reward"])
    rows = []
    for i in range(n):
        state = results["state"][i] if i < len(results.get("state") or []) else {}
        row: dict[str, Any] = {
            "example_id": results["example_id"][i],
            "prompt": to_plain(results["prompt"][i]),
            "completion": to_plain(results["completion"][i]),
            "answer": results["answer"][i],
            "task": results["task"][i],
            "info": results["info"][i],
            "reward": results["reward"][i],
        }
        for name, values in (results.get("metrics") or {}).items():
            row[name] = values[i]
        for column in columns:
            if column in _DEFAULT_EXCLUDED or column in row:
                continue
            row[column] = state.get(column) if hasattr(state, "get") else None
        rows.append(row)
    return Dataset.from_list(rows)


def _error_class(name: str) -> type[errors.VFError]:
    from verifiers.classic.error_data import vf_error_types

    for cls in vf_error_types():
        if cls.__name__ == name:
            return cls
    return errors.RolloutError


def rebuild_error(record: Any) -> Any:
    """A saved error record as the typed error it was (its ``phase`` kept)."""
    if not isinstance(record, dict) or "type" not in record:
        return record
    cls = _error_class(str(record["type"]))
    try:
        exc = cls(record.get("message", ""))
    except TypeError:
        exc = errors.RolloutError(record.get("message", ""))
    exc.phase = record.get("phase")
    if "status_code" in record and isinstance(exc, errors.ModelError):
        exc.status_code = record.get("status_code")
        exc.retries = record.get("retries") or 0
    return exc
