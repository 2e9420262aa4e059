"""One model call and the trajectory step it becomes, for either era of the classic API.

Environments of the dict era (before verifiers 0.1.11) talk to a ``ModelClient`` and keep the
server's JSON reply (``state["responses"]``); typed-era environments talk to a ``vf.Client`` and
keep a ``vf.Response``. Both steps carry the same token ids, masks and logprobs for training.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from verifiers.clients import make_client, model_client
from verifiers.clients.responses import (
    field,
    finish_reason,
    first_choice,
    response_messages,
    response_tokens,
    response_usage,
)
from verifiers.envs.messages import strip_nones_from_content
from verifiers.errors import EmptyModelResponseError, InvalidModelResponseError
from verifiers.messages.convert import tool_from_raw
from verifiers.messages.models import AssistantMessage, Message, Response, Tool
from verifiers.types import (
    Messages,
    MessageType,
    SamplingArgs,
    State,
    TrajectoryStep,
    TrajectoryStepTokens,
)


def dict_request_args(
    sampling_args: SamplingArgs | None, message_type: MessageType
) -> SamplingArgs:
    """Sampling args as the classic SDK sends them: ``max_tokens`` is ``max_completion_tokens``
    for chat, None values are dropped, and ``n`` is 1 (a group is separate rollouts)."""
    args = {k: v for k, v in (sampling_args or {}).items() if v is not None}
    if message_type == "chat" and "max_tokens" in args:
        args["max_completion_tokens"] = args.pop("max_tokens")
    if args.get("n", 1) != 1:
        args["n"] = 1
    return args


async def dict_model_call(
    client: Any,
    model: str,
    prompt: Any,
    oai_tools: list[dict[str, Any]] | None,
    sampling_args: SamplingArgs | None,
    message_type: MessageType,
) -> Any:
    """A dict-era call: the server's JSON reply (or the user's client object's own reply)."""
    transport = model_client(client)
    args = dict_request_args(sampling_args, message_type)
    if message_type == "chat":
        if not isinstance(prompt, list):
            raise TypeError("chat environments need a list of messages as the prompt")
        return await transport.chat(
            model=model,
            messages=strip_nones_from_content(prompt),
            tools=oai_tools or None,
            sampling_args=args,
        )
    if oai_tools:
        raise ValueError("oai_tools are not supported for completion tasks.")
    if not isinstance(prompt, str):
        raise TypeError("completion environments need a string prompt")
    return await transport.complete(model=model, prompt=prompt, sampling_args=args)


def check_dict_reply(response: Any, message_type: MessageType, release: Any) -> None:
    """Refuse a dict-era reply as ``get_model_response`` of the environment's release did: from
    0.1.9 one that is None or has no ``choices``; from 0.1.10 also other than one choice, and
    one with no content and no tool calls (that error carries the reply, so the rollout still
    records the turn the model took)."""
    if not release.rejects_missing_reply:
        return
    if response is None:
        raise EmptyModelResponseError("Model returned no response")
    choices = field(response, "choices")
    if choices is None:
        raise EmptyModelResponseError("Model returned no response choices")
    if not release.rejects_malformed_reply:
        return
    if len(choices) != 1:
        raise InvalidModelResponseError(f"Model returned {len(choices)} choices, expected 1")
    if message_type == "chat":
        message = field(choices[0], "message")
        empty = not (field(message, "content") or field(message, "tool_calls"))
        reason = "Model returned no content and did not call any tools"
    else:
        empty, reason = not field(choices[0], "text"), "Model returned no content"
    if empty:
        error = EmptyModelResponseError(reason)
        error.response = response
        raise error


def runtime_tools(tool_defs: Any) -> list[Tool] | None:
    """The rollout's tools as ``vf.Tool`` objects, None when there are none."""
    if not tool_defs:
        return None
    return [tool_from_raw(t) for t in tool_defs]


async def typed_model_call(
    state: State,
    prompt: Any,
    message_type: MessageType,
    client: Any = None,
    model: str | None = None,
    tool_defs: list[Tool] | None = None,
    sampling_args: SamplingArgs | None = None,
) -> Response:
    """A typed-era call through ``vf.Client.get_response``; usage is added to the state."""
    vf_client = make_client(client if client is not None else state["client"], message_type)
    response = await vf_client.get_response(
        prompt=prompt,
        model=model or state["model"],
        sampling_args=dict(sampling_args or state.get("sampling_args") or {}),
        tools=runtime_tools(tool_defs if tool_defs is not None else state.get("tool_defs")),
        state=state,
    )
    add_usage(state, response)
    return response


class UsageTracker:
    """``state["usage_tracker"]`` (verifiers 0.1.11+): the live token counts of a rollout, the
    same dict as ``state["usage"]``."""

    def __init__(self, usage: dict[str, float]) -> None:
        self.usage = usage

    def increment(self, input_tokens: float = 0, output_tokens: float = 0) -> None:
        self.usage["input_tokens"] = self.usage.get("input_tokens", 0.0) + float(input_tokens)
        self.usage["output_tokens"] = self.usage.get("output_tokens", 0.0) + float(output_tokens)

    def snapshot(self) -> dict[str, float]:
        return dict(self.usage)


def count_usage(state: State, input_tokens: float, output_tokens: float) -> None:
    tracker = state.get("usage_tracker")
    if not isinstance(tracker, UsageTracker):
        usage = state.get("usage")
        if not isinstance(usage, dict):
            usage = state["usage"] = {"input_tokens": 0.0, "output_tokens": 0.0}
        tracker = state["usage_tracker"] = UsageTracker(usage)
    tracker.increment(input_tokens, output_tokens)


def add_usage(state: State, response: Response) -> None:
    if response.usage is not None:
        count_usage(state, response.usage.prompt_tokens, response.usage.completion_tokens)


def typed_completion(response: Response) -> list[Message]:
    """The reply as the completion messages of its step: one ``vf.AssistantMessage``."""
    message = response.message
    extras = {
        k: v
        for k, v in (message.model_extra or {}).items()
        if k not in ("finish_reason", "is_truncated", "tokens")
    }
    return [
        AssistantMessage(
            content=message.content,
            reasoning_content=message.reasoning_content,
            thinking_blocks=message.thinking_blocks,
            tool_calls=message.tool_calls,
            **extras,
        )
    ]


def typed_tokens(
    response: Response | None, max_seq_len: int | None = None
) -> TrajectoryStepTokens | None:
    """Token data of a ``vf.Response``, cut to ``max_seq_len`` when given (an overlong prompt
    keeps no completion tokens)."""
    tokens = response.message.tokens if response is not None else None
    if tokens is None:
        return None
    prompt_ids, prompt_mask = list(tokens.prompt_ids), list(tokens.prompt_mask)
    completion_ids, completion_mask = list(tokens.completion_ids), list(tokens.completion_mask)
    logprobs = list(tokens.completion_logprobs)
    overlong = truncated = False
    if max_seq_len is not None:
        if len(prompt_ids) > max_seq_len:
            overlong = truncated = True
            prompt_ids, prompt_mask = prompt_ids[:max_seq_len], prompt_mask[:max_seq_len]
            completion_ids, completion_mask, logprobs = [], [], []
        elif len(prompt_ids) + len(completion_ids) > max_seq_len:
            truncated = True
            keep = max_seq_len - len(prompt_ids)
            completion_ids, completion_mask, logprobs = (
                completion_ids[:keep],
                completion_mask[:keep],
                logprobs[:keep],
            )
    out: TrajectoryStepTokens = {
        "prompt_ids": prompt_ids,
        "prompt_mask": prompt_mask,
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "completion_logprobs": logprobs,
        "overlong_prompt": overlong,
        "is_truncated": truncated,
        "routed_experts": tokens.routed_experts,
    }
    if tokens.multi_modal_data is not None:
        out["multi_modal_data"] = tokens.multi_modal_data
    if tokens.prompt_attribution is not None:
        out["prompt_attribution"] = attribution_data(tokens.prompt_attribution, len(prompt_ids))
    return out


PER_TOKEN_ATTRIBUTION = ("token_ids", "message_indices", "sampled_mask", "is_content")
"""The fields of a prompt attribution (a renderer's ``RenderedTokens``) with one entry per
prompt token; the rest (``message_roles``) are per message."""


def attribution_data(attribution: Any, prompt_len: int) -> dict[str, Any]:
    """A renderer's prompt attribution as a JSON-ready dict, its per-token fields cut to the
    ``prompt_len`` tokens the step kept. Multi-modal data is left out: the step carries it once,
    as ``multi_modal_data``."""
    if dataclasses.is_dataclass(attribution) and not isinstance(attribution, type):
        data = {f.name: getattr(attribution, f.name) for f in dataclasses.fields(attribution)}
    elif hasattr(attribution, "model_dump"):
        data = attribution.model_dump()
    else:
        data = dict(attribution)
    if "multi_modal_data" in data:
        data["multi_modal_data"] = None
    for name in PER_TOKEN_ATTRIBUTION:
        if isinstance(data.get(name), list | tuple):
            data[name] = list(data[name][:prompt_len])
    return data


def typed_step(
    state: State, prompt: Any, response: Response, max_seq_len: int | None
) -> TrajectoryStep:
    tokens = typed_tokens(response, max_seq_len)
    truncated = bool(response.message.is_truncated) or bool(tokens and tokens["is_truncated"])
    return _step(state, prompt, typed_completion(response), response, tokens, truncated)


def dict_step(
    state: State, prompt: Any, response: Any, message_type: MessageType, max_seq_len: int | None
) -> TrajectoryStep:
    """The dict-era step for one reply; counts its usage and keeps the reply in ``responses``."""
    new = response_messages(response, message_type)
    prompt_tokens, completion_tokens = response_usage(response)
    usage = state.setdefault("usage", {"prompt_tokens": 0, "completion_tokens": 0})
    usage["prompt_tokens"] = usage.get("prompt_tokens", 0) + prompt_tokens
    usage["completion_tokens"] = usage.get("completion_tokens", 0) + completion_tokens
    tokens = response_tokens(response, message_type, max_seq_len)
    truncated = finish_reason(response) == "length" or bool(tokens and tokens["is_truncated"])
    state.setdefault("responses", []).append(response)
    return _step(state, prompt, new, response, tokens, truncated)


def _step(
    state: State, prompt: Any, completion: Any, response: Any, tokens: Any, truncated: bool
) -> TrajectoryStep:
    """A trajectory step as a reply leaves it, in either era: not yet scored, no extras."""
    return {
        "prompt": prompt,
        "completion": completion,
        "response": response,
        "tokens": tokens,
        "reward": None,
        "advantage": None,
        "is_truncated": truncated,
        "trajectory_id": state.get("trajectory_id", ""),
        "extras": {},
    }


def check_not_empty(step: TrajectoryStep, message_type: MessageType) -> None:
    """Raise ``EmptyModelResponseError`` for a dict-era reply with no content and no tool calls
    (typed-era clients check this before the step exists)."""
    if isinstance(step["response"], Response):
        return
    new = step["completion"]
    if message_type == "chat" and not isinstance(new, str):
        empty = not new or (not new[0].get("content") and not new[0].get("tool_calls"))
    else:
        empty = not new
    if empty and first_choice(step["response"]) is not None:
        raise EmptyModelResponseError(
            "the model returned no content and no tool calls "
            f"(finish_reason={finish_reason(step['response'])!r})"
        )


# The classic ``verifiers.utils.response_utils`` functions (async, as they were). Each takes both
# releases' reply shapes: a ``vf.Response`` (0.1.11+) or the server's chat-completion JSON
# (earlier), and both call signatures (``parse_response_tokens(response, max_seq_len)`` and the
# older ``(response, message_type, max_seq_len)``).


async def parse_response_message(response: Response) -> Messages:
    """The reply as its completion: one ``vf.AssistantMessage``."""
    return typed_completion(response)


async def parse_response_messages(response: Any, message_type: str = "chat") -> Messages:
    if isinstance(response, Response):
        return typed_completion(response)
    return response_messages(response, "completion" if message_type == "completion" else "chat")


async def parse_response_tokens(
    response: Any, message_type: Any = None, max_seq_len: int | None = None
) -> TrajectoryStepTokens | None:
    if isinstance(message_type, int) and not isinstance(message_type, bool):
        message_type, max_seq_len = None, message_type
    if response is None or isinstance(response, Response):
        tokens = typed_tokens(response, max_seq_len)
        if response is not None and response.message.tokens is not None:
            # moved, not copied, as the classic function does: the step holds them now
            response.message.tokens.prompt_attribution = None
            response.message.tokens.multi_modal_data = None
        return tokens
    return response_tokens(response, message_type or "chat", max_seq_len)


async def parse_is_truncated(response: Any, message_type: str = "chat") -> bool:
    if isinstance(response, Response):
        return bool(response.message.is_truncated)
    return finish_reason(response) == "length"
