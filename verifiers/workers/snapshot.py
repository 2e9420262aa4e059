"""A finished rollout's state as data that crosses a process boundary, and back.

A snapshot keeps everything the results file, the report and the trainer read: the row, the
conversation (messages in OpenAI's shape), reward, advantage, metrics, errors (as their records),
stop condition, timing (milliseconds), usage, and the trajectory with each step's token ids,
masks, logprobs and the reply itself. Live objects (the client, trackers) stay behind. Rebuilt,
it reads like the state it came from: ``state["error"]`` is the typed error again.
"""

from __future__ import annotations

import json
from typing import Any

from verifiers.errors import to_record
from verifiers.messages.convert import to_plain
from verifiers.messages.dicts import as_messages
from verifiers.messages.models import MessageModel, Response
from verifiers.messages.timing import milliseconds
from verifiers.results.records import rebuild_error
from verifiers.types import ModelResponse, State

LIVE_KEYS = frozenset({"client", "usage_tracker"})


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    kind = type(value)  # the common exact types first: a state is mostly these
    if kind in _SCALARS:
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): _plain(v) for k, v in value.items()}
    if kind is list:
        return [_plain(v) for v in value]
    if isinstance(value, MessageModel):
        return value.model_dump(exclude_none=True)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, BaseException):
        return to_record(value)
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    return repr(value)


def _at(messages: Any, conversation: list[Any] | None, start: int) -> list[int] | None:
    """``[start, end]`` where ``messages`` are the conversation's own message objects from
    ``start`` on (as a rollout's steps hold them), else None."""
    if conversation is None or type(messages) is not list:
        return None
    end = start + len(messages)
    if end > len(conversation):
        return None
    for mine, theirs in zip(messages, conversation[start:end], strict=True):
        if mine is not theirs:
            return None
    return [start, end]


def _step(step: dict[str, Any], conversation: list[Any] | None = None) -> dict[str, Any]:
    out = {k: _plain(v) for k, v in step.items() if k not in ("prompt", "completion", "response")}
    prompt, completion = step.get("prompt"), step.get("completion")
    if (bounds := _at(prompt, conversation, 0)) is not None:
        out["prompt_at"] = bounds
        if (after := _at(completion, conversation, bounds[1])) is not None:
            out["completion_at"] = after
    if "prompt_at" not in out:
        out["prompt"] = to_plain(prompt)
    if "completion_at" not in out:
        out["completion"] = to_plain(completion)
    response = step.get("response")
    out["response_kind"] = "vf" if isinstance(response, Response) else "json"
    out["response"] = _plain(response)
    return out


def _conversation(state: State) -> list[Any] | None:
    """The rollout's messages as it holds them: its prompt, then its completion."""
    row = dict.get(state, "input")
    prompt = row.get("prompt") if isinstance(row, dict) else None
    completion = dict.get(state, "completion")
    if type(prompt) is not list or type(completion) is not list:
        return None
    return [*prompt, *completion]


def snapshot(state: State, step_slices: bool = False) -> dict[str, Any]:
    """The JSON-ready snapshot of a finished state (see the module docstring). With
    ``step_slices`` (a caller that reads them asked: ``RunGroupRequest.step_slices``), a
    trajectory step's prompt and completion that are the rollout's own messages are sent as
    their bounds in its conversation (``prompt_at``, ``completion_at``), not as copies: each
    step's prompt repeats the history before it, so a rollout of T turns sent ~T^2/2 messages."""
    out: dict[str, Any] = {}
    conversation = _conversation(state) if step_slices else None
    for key, value in dict.items(state):
        if key in LIVE_KEYS or key.startswith("_"):
            continue
        if key == "input":
            out["input"] = {**_plain(value), "prompt": to_plain(value.get("prompt"))}
        elif key == "trajectory":
            out["trajectory"] = [_step(step, conversation) for step in value or []]
        elif key in ("completion", "prompt", "final_env_response"):
            out[key] = to_plain(value)
        elif key == "timing":
            out["timing"] = milliseconds(value)
        elif key == "responses":
            out["responses"] = [_plain(r) for r in value or []]
        else:
            out[key] = _plain(value)
    return out


def _rebuild_step(step: dict[str, Any], said: _Conversation) -> dict[str, Any]:
    step = dict(step)
    kind = step.pop("response_kind", "json")
    response = step.get("response")
    if isinstance(response, dict):
        step["response"] = (
            Response.model_validate(response) if kind == "vf" else ModelResponse(response)
        )
    prompt_at, completion_at = step.pop("prompt_at", None), step.pop("completion_at", None)
    if prompt_at is not None:
        step["prompt"] = said.at(prompt_at)
    else:
        step["prompt"] = said.slice(step.get("prompt"), 0)
    prompt = step["prompt"]
    if completion_at is not None:
        step["completion"] = said.at(completion_at)
    elif type(prompt) is list:
        step["completion"] = said.slice(step.get("completion"), len(prompt))
    else:
        step["completion"] = as_messages(step.get("completion"))
    return step


class _Conversation:
    """A restored rollout's messages (its prompt, then its completion), as sent and as rebuilt,
    so that a trajectory step's prompt and completion hold the conversation's own message
    objects where they are a slice of it, as they do in the process that ran the rollout: a
    copy of each (a tool rollout's steps repeat four of its messages) cost the caller ~2 KB of
    memory a rollout and the CPU of rebuilding them."""

    def __init__(self, raw: list[Any], rebuilt: list[Any]) -> None:
        self.raw, self.rebuilt = raw, rebuilt

    def at(self, bounds: Any) -> list[Any]:
        """The conversation's messages within ``bounds`` (a snapshot's ``prompt_at`` or
        ``completion_at``), refused when they are not bounds within it."""
        if (
            type(bounds) is not list
            or len(bounds) != 2
            or not all(type(b) is int for b in bounds)
            or not 0 <= bounds[0] <= bounds[1] <= len(self.rebuilt)
        ):
            raise ValueError(
                f"a step's message bounds {bounds!r} are not within its rollout's "
                f"{len(self.rebuilt)} messages"
            )
        return self.rebuilt[bounds[0] : bounds[1]]

    def slice(self, messages: Any, start: int) -> Any:
        """``messages`` rebuilt: the conversation's own from ``start`` on if they are equal to
        it there, else rebuilt anew."""
        if type(messages) is list:
            end = start + len(messages)
            if end <= len(self.raw) and self.raw[start:end] == messages:
                return self.rebuilt[start:end]
        return as_messages(messages)


def _messages(value: Any) -> list[Any]:
    return value if type(value) is list else []


_last_tools: dict[str, Any] = {}
"""The last tool definitions restored, by key (``tool_defs``, the dict era's ``oai_tools``): the
next rollout's, equal as they mostly are (an environment's tools), are the same list, not a copy
each (~2 KB a rollout of a tool run). Never changed in place: a new value replaces it."""


def _shared_tools(key: str, value: Any) -> Any:
    last = _last_tools.get(key)
    if type(value) is not list:
        return value
    if value == last:
        return last
    _last_tools[key] = value
    return value


def restore(data: dict[str, Any]) -> State:
    """A state rebuilt from its snapshot (messages as dicts readable as objects)."""
    data = dict(data)
    raw_row = data.pop("input", None) or {}
    raw_prompt, raw_completion = raw_row.get("prompt"), data.get("completion")
    prompt, completion = as_messages(raw_prompt), as_messages(raw_completion)
    row = {**raw_row, "prompt": prompt}
    state = State(input=row)
    said = _Conversation(
        _messages(raw_prompt) + _messages(raw_completion),
        _messages(prompt) + _messages(completion),
    )
    for key, value in data.items():
        if key == "trajectory":
            value = [_rebuild_step(s, said) for s in value or []]
        elif key == "completion":
            value = completion
        elif key == "final_env_response":
            value = as_messages(value)
        elif key == "error":
            value = rebuild_error(value)
        elif key == "responses":
            value = [ModelResponse(r) if isinstance(r, dict) else r for r in value or []]
        elif key == "task" and value == raw_row:
            value = dict(raw_row)  # as a run in process makes it: a copy of the row's top
        elif key in ("tool_defs", "oai_tools"):
            value = _shared_tools(key, value)
        elif key == "prompt":
            continue  # the row holds it
        dict.__setitem__(state, key, value)
    return state


def _tool_call(call: Any) -> Any:
    """A tool call saved as a JSON string of ``{id, name, arguments}`` in OpenAI's shape again."""
    if isinstance(call, str):
        try:
            call = json.loads(call)
        except ValueError:
            return call
    if isinstance(call, dict) and "function" not in call and "name" in call:
        arguments = call.get("arguments")
        return {
            "id": call.get("id"),
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            },
        }
    return call


def _seconds_to_ms(timing: Any) -> Any:
    """0.1.11+'s timing (nested spans in seconds) in this SDK's milliseconds form."""
    if not isinstance(timing, dict) or "generation_ms" in timing:
        return timing

    def ms(key: str) -> float:
        value = timing.get(key)
        value = value.get("duration") if isinstance(value, dict) else value
        return float(value or 0.0) * 1000

    return {
        "generation_ms": ms("generation"),
        "scoring_ms": ms("scoring"),
        "total_ms": ms("total"),
        "model_ms": ms("model"),
    }


def from_output(row: dict[str, Any], rollout_index: int, output: dict[str, Any]) -> State:
    """The state a ``RolloutOutput`` row (0.1.11+'s shape) describes: what a server that does
    not know this SDK's ``output: "state"`` answers (verifiers' own ``ZMQEnvServer``). The row
    sent is the input; tool calls saved as JSON strings are OpenAI-shaped calls again, the
    ``ErrorData`` an error, the timing milliseconds. A row has no trajectory (no token ids)."""
    from verifiers.classic.error_data import is_error_data
    from verifiers.errors import RolloutError

    state = State(input=dict(row))
    for key, value in output.items():
        if key in ("prompt", "error_chain", "long_error_chain"):
            continue  # the row holds the prompt; the chains are the error's
        if key == "completion" and isinstance(value, list):
            value = as_messages(
                [
                    {**m, "tool_calls": [_tool_call(c) for c in m["tool_calls"]]}
                    if isinstance(m, dict) and m.get("tool_calls")
                    else m
                    for m in value
                ]
            )
        elif key == "error":
            if is_error_data(value):
                error = RolloutError(f"{value['error']}: {value['message']}")
                error.phase = "worker"
                value = error
            else:
                value = rebuild_error(value)
        elif key == "timing":
            value = _seconds_to_ms(value)
        elif key == "token_usage":
            key = "usage"
        dict.__setitem__(state, key, value)
    state.setdefault("trajectory", [])
    state["rollout_index"] = rollout_index
    return state


def failed_state(row: dict[str, Any], rollout_index: int, error: BaseException) -> State:
    """The state of a rollout that never ran to the end (its worker died, it timed out): the
    row, no completion, reward 0, and the error on it."""
    from verifiers.errors import record_error

    state = State(input=dict(row))
    state.update(
        completion=[],
        trajectory=[],
        reward=0.0,
        advantage=0.0,
        metrics={},
        is_completed=True,
        is_truncated=False,
        stop_condition="has_error",
        timing={},
        rollout_index=rollout_index,
    )
    record_error(state, error, phase="worker")
    return state
