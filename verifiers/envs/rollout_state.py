"""A new rollout's state, with the keys and types its environment's release expects.

Every state holds the dataset row once (``state["input"]``; ``prompt``, ``answer``, ``info``,
``example_id`` read and write through to it), the client, model and sampling args, an empty
trajectory and the bookkeeping the engine fills in. What differs by release:

- dict era: message dicts, ``oai_tools``, ``task`` a string, timing in milliseconds,
  ``responses`` (the raw replies), usage as ``prompt_tokens``/``completion_tokens``;
- typed era: typed messages (a completion prompt becomes ``[vf.TextMessage]``), ``tool_defs``
  as ``vf.Tool``, timing a ``vf.RolloutTiming``, usage as ``input_tokens``/``output_tokens``;
  from 0.1.14 ``task`` is the row as a JSON task payload.

Two inputs that later releases refused are accepted in every release, since nobody gains from
the refusal and every environment written before it used them: a plain-string ``task`` is a task
name (0.1.14+ refused it), and ``info["oai_tools"]`` is the row's tools in OpenAI's shape
(0.1.11+ refused it; it becomes ``tool_defs``).
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Mapping
from typing import Any

from verifiers.envs.model_turn import UsageTracker
from verifiers.messages.convert import normalize_messages, tool_from_raw
from verifiers.messages.timing import new_timing
from verifiers.types import State


def task_payload(row: Mapping[str, Any]) -> dict[str, Any] | str:
    """The row's task payload (verifiers 0.1.14+): ``info["task"]`` or a JSON ``task`` column
    when present, else the row itself; a ``task`` that is a plain string (not JSON) is a task
    name, as in every release before 0.1.14, and is returned as it is."""
    info = row.get("info")
    source = info.get("task") if isinstance(info, Mapping) else None
    if source is None:
        source = row.get("task")
    if source is None:
        return dict(row)
    if isinstance(source, str):
        text = source.strip()
        if not text.startswith(("{", "[", '"')):
            return source
        try:
            source = json.loads(text)
        except json.JSONDecodeError:
            return source
        if isinstance(source, str):
            return source
    if not isinstance(source, Mapping):
        raise TypeError(
            f"a task payload must be a JSON object (or a plain string naming the task); "
            f"got {type(source).__name__}"
        )
    return dict(source)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _copy(value: Any) -> Any:
    """``copy.deepcopy`` of a dataset row's value: JSON-shaped data (plain dicts, lists and
    scalars, what rows hold) copied directly, ~5x faster; anything else by ``deepcopy``."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    return copy.deepcopy(value)


def _row(input: Any) -> dict[str, Any]:
    row = _copy(dict(input))
    if isinstance(row.get("info"), str):
        row["info"] = json.loads(row["info"]) if row["info"].strip() else {}
    return row


def new_state(env: Any, input: Any, client: Any, model: str, sampling_args: Any) -> State:
    if env.release.typed_messages:
        return _typed_state(env, _row(input), client, model, sampling_args)
    return _dict_state(env, _row(input), client, model, sampling_args)


def bare_state(input: Any, client: Any, model: str, sampling_args: Any) -> State:
    """A state that holds the row as it came, for a rollout whose input could not be read."""
    try:
        row = dict(input)
    except (TypeError, ValueError):
        row = {"prompt": [], "example_id": 0}
    row.setdefault("example_id", 0)
    state = State(input=row)
    _common(state, client, model, sampling_args)
    state.update(responses=[], timing=new_timing(typed=False), usage={})
    return state


def _common(state: State, client: Any, model: str, sampling_args: Any) -> None:
    state.update(
        client=client,
        model=model,
        sampling_args=sampling_args,
        is_completed=False,
        is_truncated=False,
        stop_condition=None,
        trajectory=[],
        trajectory_id=uuid.uuid4().hex,
        completion=None,
        reward=None,
        metrics=None,
        error=None,
    )


def _dict_state(
    env: Any, row: dict[str, Any], client: Any, model: str, sampling_args: Any
) -> State:
    row.setdefault("info", {})
    row.setdefault("task", env.env_id or "default")
    row.setdefault("example_id", 0)
    info = row["info"] if isinstance(row["info"], dict) else {}
    state = State(input=row)
    _common(state, client, model, sampling_args)
    state.update(
        oai_tools=info.get("oai_tools") or env.oai_tools,
        responses=[],
        turn=0,
        advantage=None,
        prompt_too_long=False,
        usage={"prompt_tokens": 0, "completion_tokens": 0},
        timing=new_timing(typed=False),
    )
    if env.release.final_env_response_key:
        state["final_env_response"] = None
    return state


def _typed_state(
    env: Any, row: dict[str, Any], client: Any, model: str, sampling_args: Any
) -> State:
    info = row.get("info")
    if isinstance(info, dict) and "oai_tools" in info:
        info = dict(info)
        listed = info.pop("oai_tools") or []
        info.setdefault("tool_defs", list(listed))
        row["info"] = info
    row.setdefault("example_id", 0)
    payload = task_payload(row) if env.release.task_is_payload else None
    if isinstance(payload, dict):
        row = dict(payload)
        row.setdefault("example_id", 0)
        state = State(input=row)
        dict.__setitem__(state, "task", payload)
    elif isinstance(payload, str):  # a task name
        state = State(input=row)
        dict.__setitem__(state, "task", payload)
    else:
        row.setdefault("task", env.env_id or "default")
        state = State(input=row)
    prompt = row.get("prompt")
    if isinstance(prompt, str | list):
        state["prompt"] = normalize_messages(prompt, field_name="input.prompt")
    _common(state, client, model, sampling_args)
    info = state.get("info")
    if isinstance(info, dict) and "tool_defs" in info:
        tools = info["tool_defs"]
    else:
        tools = env.tool_defs if env.tool_defs is not None else (env.oai_tools or [])
    usage = {"input_tokens": 0.0, "output_tokens": 0.0}
    state.update(
        tool_defs=[tool_from_raw(t) for t in tools or []],
        usage_tracker=UsageTracker(usage),
        usage=usage,
        final_env_response=None,
        timing=new_timing(typed=True),
    )
    return state
