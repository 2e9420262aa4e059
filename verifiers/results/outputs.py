"""Rollouts as verifiers 0.1.11+ hands them out: ``RolloutOutput`` rows (``results["outputs"]``).

A row is JSON-ready: messages as dicts (an assistant message's tool calls as JSON strings, as
those releases save them), the error as ``ErrorData``, timing as a dict, each metric also as a
top-level key, and any requested state columns. This SDK's own results file
(``results.jsonl``, ``verifiers.results.records``) is richer and lossless; these rows exist for
code written against the classic API (``state_to_output``, ``make_dataset(results)``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verifiers import classic
from verifiers.classic.error_data import error_data
from verifiers.messages.convert import to_plain
from verifiers.messages.models import MessageModel
from verifiers.messages.timing import milliseconds
from verifiers.types import RolloutOutput, State


def _jsonable(value: Any) -> Any:
    if isinstance(value, MessageModel):
        return value.model_dump(exclude_none=True)
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def is_json_serializable(value: Any) -> bool:
    try:
        json.dumps(_jsonable(value))
    except (TypeError, ValueError):
        return False
    return True


def output_messages(messages: Any) -> Any:
    """Messages as dicts, with each assistant tool call a JSON string of ``{id, name,
    arguments}`` (the 0.1.11+ saved form)."""
    plain = to_plain(messages)
    if not isinstance(plain, list):
        return plain
    out = []
    for message in plain:
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if calls:
            message = dict(message)
            message["tool_calls"] = [
                json.dumps(
                    {
                        "id": c.get("id"),
                        "name": (c.get("function") or {}).get("name", c.get("name")),
                        "arguments": (c.get("function") or {}).get("arguments", c.get("arguments")),
                    }
                )
                if isinstance(c, dict)
                else c
                for c in calls
            ]
        out.append(message)
    return out


def token_usage(state: State) -> dict[str, float] | None:
    usage = state.get("usage")
    if not isinstance(usage, Mapping):
        return None
    return {
        "input_tokens": float(usage.get("input_tokens", usage.get("prompt_tokens", 0)) or 0),
        "output_tokens": float(usage.get("output_tokens", usage.get("completion_tokens", 0)) or 0),
    }


def timing_output(timing: Any) -> dict[str, Any]:
    if isinstance(timing, MessageModel):
        return timing.model_dump()
    if isinstance(timing, Mapping):
        return dict(timing)
    return milliseconds(timing)


def state_to_output(
    state: State, state_columns: list[str] | None = None, release: classic.Release | None = None
) -> RolloutOutput:
    """One rollout's state as a ``RolloutOutput`` row (see the module docstring), in the shape
    of ``release`` (default: the current one): before 0.1.14 it carries the string ``task``,
    before 0.1.11 ``oai_tools`` instead of ``tool_defs``.

    Raises ``ValueError`` when a requested state column is not JSON-serializable.
    """
    if state.get("example_id") is None:
        raise ValueError("state['example_id'] is required.")
    release = release or classic.current()
    tools = state.get("tool_defs")
    output = RolloutOutput(
        example_id=state["example_id"],
        prompt=output_messages(state.get("prompt")),
        completion=output_messages(state.get("completion")),
        answer=state.get("answer", ""),
        info=state.get("info", {}),
        reward=state.get("reward") or 0.0,
        error=None,
        timing=timing_output(state.get("timing")),
        is_completed=bool(state.get("is_completed", False)),
        is_truncated=bool(state.get("is_truncated", False)),
        stop_condition=state.get("stop_condition"),
        metrics=dict(state.get("metrics") or {}),
        tool_defs=[_jsonable(t) for t in tools] if tools is not None else None,
    )
    if not release.typed_messages:
        output.pop("tool_defs")
        output["oai_tools"] = _jsonable(state.get("oai_tools"))
    if not release.task_is_payload:
        output["task"] = state.get("task") or "default"
    elif isinstance(state.get("task"), str):  # a task name, accepted in every release
        output["task"] = state["task"]
    usage = token_usage(state)
    if usage is not None:
        output["token_usage"] = usage
    error = state.get("error")
    if error is not None:
        output["error"] = error_data(error) if isinstance(error, BaseException) else error
        output["error_chain"] = output["error"]["error_chain_repr"]
        output["long_error_chain"] = output["error"]["error_chain_str"]
    if not output["answer"]:
        output.pop("answer")
    if not output["info"]:
        output.pop("info")
    for name, value in output["metrics"].items():
        output.setdefault(name, value)
    for column in state_columns or []:
        value = state.get(column)
        if column != "trajectory" and not is_json_serializable(value):
            raise ValueError(
                f"state_columns value for '{column}' is not JSON-serializable: "
                f"{type(value).__name__}. Only JSON-serializable types are allowed."
            )
        output[column] = _jsonable(value)
    return output


def states_to_outputs(
    states: list[State],
    state_columns: list[str] | None = None,
    release: classic.Release | None = None,
) -> list[RolloutOutput]:
    return [state_to_output(s, state_columns, release) for s in states]


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
