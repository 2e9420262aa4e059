"""A finished rollout's state as the row the classic API returns (``RolloutOutput``, in the shape
of the environment's release): what ``GenerateOutputs["outputs"]`` builds on first access and
what results files hold, beside the shapes themselves."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from verifiers import classic
from verifiers.classic.error_data import error_data
from verifiers.messages.convert import to_plain
from verifiers.messages.models import MessageModel
from verifiers.messages.timing import milliseconds
from verifiers.types.shapes import AttrDict, RolloutOutput, State


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


class GenerateMetadata(AttrDict):
    """Metadata of a ``generate``/``evaluate`` run: the classic keys (``env_id``, ``model``,
    ``avg_reward``, ``avg_metrics``, ``time_ms``, ``path_to_save``...) and every field of
    ``verifiers.results.RunMetadata`` (``summary``, ``schema_version``, ...)."""


class GenerateOutputs(AttrDict):
    """Results of ``Environment.generate``/``evaluate`` in both classic shapes: the columns of
    verifiers 0.1.x (``prompt``, ``completion``, ``reward``, ``metrics``, ``state``...) and the
    rows of 0.1.11+ (``outputs``: one ``RolloutOutput`` per rollout, built on first access)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for key in ("prompt", "completion", "answer", "state", "task", "info", "example_id"):
            self.setdefault(key, [])
        self.setdefault("reward", [])
        self.setdefault("metrics", {})
        self.setdefault("metadata", None)

    def shape_rows_as(self, release: Any) -> None:
        """Build ``outputs`` in the row shape of ``release`` (the environment's; by default
        the current one). An attribute, not a key: the result's keys are the classic ones."""
        object.__setattr__(self, "_release", release)

    def __missing__(self, key: str) -> Any:
        if key != "outputs":
            raise KeyError(key)
        metadata = dict.get(self, "metadata") or {}
        columns = metadata.get("state_columns") if isinstance(metadata, dict) else None
        release = self.__dict__.get("_release")
        rows = states_to_outputs(dict.get(self, "state") or [], columns, release)
        self["outputs"] = rows
        return rows

    def __len__(self) -> int:
        return len(self["reward"]) or len(dict.get(self, "outputs") or [])

    def __repr__(self) -> str:
        """A summary, not every rollout: the full mapping of a run ran to megabytes, and
        ``asyncio.run(env.evaluate(...))`` formats its result with ``repr`` on its way out
        (it restores its SIGINT handler, a ``partial`` holding the main task, and ``enum``
        formats that for an error message it discards): seconds of CPU at a few thousand
        rollouts. The data is the mapping's: ``dict(results)``, ``results["state"]``."""
        rewards = [r for r in dict.get(self, "reward") or [] if isinstance(r, int | float)]
        mean = f", mean reward {sum(rewards) / len(rewards):.4g}" if rewards else ""
        return f"GenerateOutputs({len(self)} rollouts{mean}; keys: {', '.join(map(str, self))})"
