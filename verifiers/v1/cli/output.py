"""Reading a v1 run's saved episodes back (upstream's ``verifiers.v1.cli.output`` module path,
as far as its tests use it): ``read_episodes`` over ``traces.jsonl``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from verifiers.v1.episode import TRACES_FILE, Episode, WireEpisode


def read_episodes(results_dir: Path, trace_type: Any) -> list[Episode[Any, Any, Any]]:
    """The episodes of ``results_dir/traces.jsonl``, their traces typed as ``trace_type``
    (``WireTrace`` reads any taskset's file without importing it). A line holding one bare
    trace (the file before episodes) is read as a one-trace episode, as upstream does."""
    adapter: TypeAdapter[Any] = TypeAdapter(trace_type)
    episodes: list[Episode[Any, Any, Any]] = []
    with (Path(results_dir) / TRACES_FILE).open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError(f"{TRACES_FILE} line {number} is not a JSON object")
            if "traces" in row:
                record: Episode[Any, Any, Any] = WireEpisode.model_validate({**row, "traces": []})
                record.traces = [adapter.validate_python(t) for t in row.get("traces") or []]
                episodes.append(record)
            else:
                episodes.append(Episode.of(adapter.validate_python(row)))
    return episodes
