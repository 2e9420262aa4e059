"""Rollouts become data: vf-eval runs filtered into a Hugging Face dataset for fine-tuning.

Each kept rollout becomes one row with ``messages`` (its prompt and completion as one
conversation, tool calls and tool results intact), ``prompt`` and ``completion`` (the same split at
the first model turn), ``reward``, ``metrics``, ``example_id`` and the run it came from. Filters,
applied in this order: errors out (``keep_errors`` to keep them), ``min_reward``, at most
``max_completion_tokens`` completion tokens, then per example ``best_of_n`` (the highest-reward
rollout) or ``top_k``, then ``dedup`` (one copy of identical completions per example). The output
directory holds ``data.parquet`` and a dataset card (``README.md``) naming the source
environments, versions, models and the filter; ``datasets.load_dataset(DIR)`` reads it.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from verifiers.errors import NothingSelectedError, UsageError
from verifiers.results.writer import read_rows


class RolloutFilter(BaseModel):
    """Which rollouts of the runs become rows (defaults keep every successful rollout)."""

    min_reward: float | None = None
    best_of_n: bool = False
    top_k: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    keep_errors: bool = False
    dedup: bool = False

    def describe(self) -> str:
        parts = [] if self.keep_errors else ["errored rollouts removed"]
        if self.min_reward is not None:
            parts.append(f"reward ≥ {self.min_reward}")
        if self.max_completion_tokens is not None:
            parts.append(f"≤ {self.max_completion_tokens} completion tokens")
        if self.best_of_n:
            parts.append("best of n per example")
        elif self.top_k is not None:
            parts.append(f"top {self.top_k} per example")
        if self.dedup:
            parts.append("duplicate completions per example removed")
        return ", ".join(parts) or "none"


class DatasetCard(BaseModel):
    """What a generated dataset came from (``vf_data.json``, and the card in words). Not named
    ``dataset_info.json``: ``datasets`` reads that name as its own split metadata."""

    sources: list[dict[str, Any]]
    filter: RolloutFilter
    description: str  # the filter in words
    rows: int
    rollouts_read: int


def conversation(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The rollout as one list of chat messages: prompt, then every completion message."""
    prompt = row.get("prompt") or []
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    completion = row.get("completion") or []
    if isinstance(completion, str):
        completion = [{"role": "assistant", "content": completion}]
    return [_clean(m) for m in [*prompt, *completion]]


def _clean(message: dict[str, Any]) -> dict[str, Any]:
    """A message as chat templates take it: role, content, and tool fields when present."""
    out = {"role": message["role"], "content": message.get("content") or ""}
    for key in ("tool_calls", "tool_call_id", "name"):
        if message.get(key):
            out[key] = message[key]
    return out


def select(rows: Iterable[dict[str, Any]], spec: RolloutFilter) -> list[dict[str, Any]]:
    """The rollouts ``spec`` keeps, in (example, reward) order."""
    kept = []
    for row in rows:
        if row.get("error") and not spec.keep_errors:
            continue
        reward = float(row.get("reward") or 0.0)
        if spec.min_reward is not None and reward < spec.min_reward:
            continue
        tokens = ((row.get("usage") or {}).get("completion_tokens")) or 0
        if spec.max_completion_tokens is not None and tokens > spec.max_completion_tokens:
            continue
        kept.append(row)
    by_example: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for row in kept:
        by_example[(row.get("_source"), row.get("example_id"))].append(row)
    out = []
    for key in sorted(by_example, key=str):
        group = sorted(by_example[key], key=lambda r: -float(r.get("reward") or 0.0))
        if spec.dedup:
            seen, unique = set(), []
            for row in group:
                text = json.dumps(row.get("completion"), sort_keys=True)
                if text not in seen:
                    seen.add(text)
                    unique.append(row)
            group = unique
        if spec.best_of_n:
            group = group[:1]
        elif spec.top_k is not None:
            group = group[: spec.top_k]
        out.extend(group)
    return out


RunReader = Callable[[Path], tuple[dict[str, Any], list[dict[str, Any]]]]
"""Reads one run argument into its source (env, version, model, run) and its rows."""


def read_results_run(run: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A vf-eval run directory's source (``metadata.json``) and rows (``results.jsonl``)."""
    meta_path, results_path = run / "metadata.json", run / "results.jsonl"
    if not results_path.exists():
        raise FileNotFoundError(f"{run} is not a vf-eval run directory (no results.jsonl)")
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    source = {
        key: meta.get(key)
        for key in ("env_id", "env_version", "env_content_hash", "model", "run_id")
    } | {"run_dir": str(run)}
    return source, list(read_rows(results_path))


def rollouts_to_dataset(
    run_dirs: list[str | Path],
    out_dir: str | Path,
    spec: RolloutFilter | None = None,
    read_run: RunReader | None = None,
) -> DatasetCard:
    """Write the rows ``spec`` keeps from the vf-eval runs in ``run_dirs`` to ``out_dir``, a
    directory of the user's own (``UsageError`` otherwise: another user's, a link, one others
    may change; checked first, and again as it is made). ``read_run`` reads each run
    (``read_results_run`` by default; vf-data passes one that also reads v1 traces)."""
    import datasets

    from verifiers.processes.own_dir import (
        foreign_above_problem,
        foreign_dir_problem,
        require_own_dir,
    )

    out = Path(out_dir)
    problem = (
        foreign_dir_problem(out, "--output") if os.path.lexists(out) else foreign_above_problem(out)
    )
    if problem:
        raise UsageError(problem)
    spec = spec or RolloutFilter()
    sources: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    for index, run_dir in enumerate(run_dirs):
        source, run_rows = (read_run or read_results_run)(Path(run_dir))
        sources.append(source)
        rows.extend({**row, "_source": index} for row in run_rows)
    chosen = select(rows, spec)
    if not chosen:  # before anything is written: no empty dataset directory is left behind
        raise NothingSelectedError(_why_nothing(rows, spec, out_dir))
    records = []
    for row in chosen:
        messages = conversation(row)
        split = len(row.get("prompt") or []) if isinstance(row.get("prompt"), list) else 1
        source = sources[row["_source"]]
        records.append(
            {
                "messages": _json(messages),
                "prompt": _json(messages[:split]),
                "completion": _json(messages[split:]),
                "reward": float(row.get("reward") or 0.0),
                "metrics": json.dumps(row.get("metrics") or {}),
                "example_id": int(row.get("example_id") or 0),
                "env_id": source["env_id"],
                "env_version": source["env_version"],
                "model": source["model"],
                "run_id": source["run_id"],
            }
        )
    require_own_dir(out, "--output")
    datasets.Dataset.from_list(records, features=_features()).to_parquet(str(out / "data.parquet"))
    card = DatasetCard(
        sources=sources,
        filter=spec,
        description=spec.describe(),
        rows=len(records),
        rollouts_read=len(rows),
    )
    (out / "vf_data.json").write_text(card.model_dump_json(indent=2))
    (out / "README.md").write_text(_card_text(card))
    return card


def _why_nothing(rows: list[dict[str, Any]], spec: RolloutFilter, out_dir: str | Path) -> str:
    if not rows:
        return f"the runs hold no rollouts; nothing written to {out_dir}"
    errors = sum(1 for r in rows if r.get("error"))
    rewards = [float(r.get("reward") or 0.0) for r in rows if not r.get("error")]
    best = f"; the best reward is {max(rewards):.3f}" if rewards else ""
    return (
        f"the filter ({spec.describe()}) kept none of the {len(rows)} rollouts read "
        f"({errors} errored{best}); nothing written to {out_dir}. Loosen it (--min-reward, "
        "--max-completion-tokens, --keep-errors)"
    )


def _json(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with tool-call arguments as JSON text, so every row has one Arrow type."""
    out = []
    for m in messages:
        calls = [
            {
                "id": c.get("id") or "",
                "type": c.get("type") or "function",
                "function": {
                    "name": (c.get("function") or {}).get("name") or "",
                    "arguments": _arguments((c.get("function") or {}).get("arguments")),
                },
            }
            for c in m.get("tool_calls") or []
        ]
        out.append(
            {
                "role": m["role"],
                "content": m.get("content") or "",
                "tool_calls": calls,
                "tool_call_id": m.get("tool_call_id") or "",
                "name": m.get("name") or "",  # a tool message's tool (templates render it)
            }
        )
    return out


def _arguments(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value or {})


def _features() -> Any:
    import datasets

    message = {
        "role": datasets.Value("string"),
        "content": datasets.Value("string"),
        "tool_calls": datasets.List(
            {
                "id": datasets.Value("string"),
                "type": datasets.Value("string"),
                "function": {
                    "name": datasets.Value("string"),
                    "arguments": datasets.Value("string"),
                },
            }
        ),
        "tool_call_id": datasets.Value("string"),
        "name": datasets.Value("string"),
    }
    return datasets.Features(
        {
            "messages": datasets.List(message),
            "prompt": datasets.List(message),
            "completion": datasets.List(message),
            "reward": datasets.Value("float64"),
            "metrics": datasets.Value("string"),
            "example_id": datasets.Value("int64"),
            "env_id": datasets.Value("string"),
            "env_version": datasets.Value("string"),
            "model": datasets.Value("string"),
            "run_id": datasets.Value("string"),
        }
    )


def _card_text(card: DatasetCard) -> str:
    # no `configs: data_files` front matter: `datasets` would key its cache on that pattern and
    # serve one directory's rows for another's of the same name
    lines = [
        "# Rollouts dataset",
        "",
        f"{card.rows} rows from {card.rollouts_read} rollouts; filter: {card.filter.describe()}.",
        "",
        "| environment | version | content hash | model | run |",
        "|---|---|---|---|---|",
    ]
    for s in card.sources:
        lines.append(
            f"| {s['env_id']} | {s['env_version']} | {s['env_content_hash']} | {s['model']} | "
            f"{s['run_id']} |"
        )
    lines += ["", "Columns: messages (the whole conversation), prompt, completion, reward,"]
    lines += ["metrics (JSON), example_id, env_id, env_version, model, run_id.", ""]
    return "\n".join(lines)
