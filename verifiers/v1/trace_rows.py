"""V1 traces as classic rows: each trace of a ``traces.jsonl`` becomes the row shape
``results.jsonl`` has (prompt, completion, reward, metrics, usage, error), so ``vf-data``
reads a v1 run's traces, or upstream's own trace files, as it reads classic runs (the other
direction, classic rollouts as traces, is ``verifiers.v1.legacy``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from verifiers.v1.chat import message_to_wire
from verifiers.v1.episode import WireEpisode
from verifiers.v1.eval_env import TRACES_FILE
from verifiers.v1.trace import Trace


def trace_row(trace: Trace[Any, Any, Any], example_id: int | None = None) -> dict[str, Any]:
    """A trace as a ``results.jsonl`` row: its last branch's messages split at the first
    model reply (prompt, then completion), its reward, metrics (rewards by name too), usage
    and first error."""
    path = trace.branches[-1].nodes if trace.nodes else []
    first = next((i for i, node in enumerate(path) if node.sampled), len(path))
    messages = [message_to_wire(node.message) for node in path]
    metrics: dict[str, float] = {k: float(v or 0.0) for k, v in trace.metrics.items()}
    for name, scored in trace.rewards.items():
        metrics.setdefault(name, scored.score if scored is not None else 0.0)
    usage = trace.usage
    error = trace.errors[0] if trace.errors else None
    data = trace.task.data
    return {
        "example_id": int(getattr(data, "idx", 0) or 0) if example_id is None else example_id,
        "prompt": messages[:first],
        "completion": messages[first:],
        "answer": str(getattr(data, "answer", "") or ""),
        "reward": trace.reward,
        "metrics": metrics,
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
        }
        if usage is not None
        else None,
        "error": {"type": error.type, "message": error.message, "status_code": error.status_code}
        if error
        else None,
        "stop_condition": trace.stop_condition,
        "is_truncated": trace.is_truncated,
    }


def read_episodes(path: str | Path) -> Iterable[WireEpisode]:
    """The episodes of a ``traces.jsonl``, read without the packages that wrote them; a line
    that is not one is a ``ValueError`` naming the file and line."""
    with Path(path).open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield WireEpisode.model_validate_json(line)
            except ValueError as exc:
                raise ValueError(
                    f"{path}:{number} is not a v1 trace episode (WireEpisode): "
                    f"{str(exc).splitlines()[0]}"
                ) from exc


def read_traces_run(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A ``traces.jsonl`` (or a directory holding one) as vf-data reads a run: its source
    (from ``metadata.json`` beside it when there is one, else the episodes' env and model) and
    one row per trace, every trace of an episode keeping the episode's example id."""
    file = Path(path)
    file = file / TRACES_FILE if file.is_dir() else file
    if not file.is_file():
        raise FileNotFoundError(f"{path} holds no results.jsonl and no {TRACES_FILE}")
    rows, env_id, model = [], None, None
    for episode in read_episodes(file):
        env_id = env_id or episode.env.id or None
        for trace in episode.traces:
            model = model or next((c.model for c in trace.calls if c.model), None)
            rows.append(trace_row(trace))
    meta_path = file.parent / "metadata.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    source = {
        "env_id": meta.get("env_id") or env_id,
        "env_version": meta.get("env_version"),
        "env_content_hash": meta.get("env_content_hash"),
        "model": meta.get("model") or model,
        "run_id": meta.get("run_id"),
        "run_dir": str(file),
    }
    return source, rows
