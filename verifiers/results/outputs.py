"""Rollouts as verifiers 0.1.11+ hands them out: ``RolloutOutput`` rows (``results["outputs"]``).

A row is JSON-ready: messages as dicts (an assistant message's tool calls as JSON strings, as
those releases save them), the error as ``ErrorData``, timing as a dict, each metric also as a
top-level key, and any requested state columns. This SDK's own results file
(``results.jsonl``, ``verifiers.results.records``) is richer and lossless; these rows exist for
code written against the classic API (``state_to_output``, ``make_dataset(results)``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verifiers.types import RolloutOutput
from verifiers.types.outputs import (  # defined beside the shapes; kept importable here
    _jsonable as _jsonable,
)
from verifiers.types.outputs import (
    is_json_serializable as is_json_serializable,
)
from verifiers.types.outputs import (
    output_messages as output_messages,
)
from verifiers.types.outputs import (
    state_to_output as state_to_output,
)
from verifiers.types.outputs import (
    states_to_outputs as states_to_outputs,
)
from verifiers.types.outputs import (
    timing_output as timing_output,
)
from verifiers.types.outputs import (
    token_usage as token_usage,
)


def make_dataset(results: Any, state_columns: list[str] | None = None, **kwargs: Any) -> Any:
    """A ``datasets.Dataset`` of a run's rows: its ``outputs`` (0.1.11+ shape), or the
    column-wise results of earlier releases."""
    if isinstance(results, dict) and dict.get(results, "outputs") and not results.get("reward"):
        from datasets import Dataset

        rows = [{k: _jsonable(v) for k, v in row.items()} for row in results["outputs"]]
        return Dataset.from_list(rows)
    from verifiers.results.records import columns_dataset

    return columns_dataset(results, state_columns=state_columns, **kwargs)


def load_outputs(results_path: str | Path) -> list[RolloutOutput]:
    """``RolloutOutput`` rows of a saved run (this SDK's ``results.jsonl``)."""
    from verifiers.results.writer import read_rows

    path = Path(results_path)
    if path.is_dir():
        path = path / "results.jsonl"
    return [RolloutOutput(row) for row in read_rows(path)]


def sanitize_tool_calls(messages: Any) -> Any:
    """Messages as dicts with each tool call a JSON string (the saved 0.1.x form)."""
    return output_messages(messages)
