"""Reading a model reply, whatever carried it: this SDK's JSON dict or a provider's object.

The lean client returns ``ModelResponse`` dicts; a user's own client object (an ``AsyncOpenAI``
subclass, an Azure client, a test double) returns its own types (``ChatCompletion``...). The
rollout code reads both through these functions, so it never depends on which one ran.
"""

from __future__ import annotations

from typing import Any, cast

from verifiers.messages.dicts import MessageDict
from verifiers.types import ChatMessage, Messages, MessageType, TrajectoryStepTokens


def field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` for mappings, ``obj.name`` otherwise; ``default`` when absent or None."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        value = obj.get(name)
    else:
        value = getattr(obj, name, None)
    return default if value is None else value


def as_plain(value: Any) -> Any:
    """Provider objects (pydantic models) as plain JSON-ready dicts; dicts and lists recursively."""
    if hasattr(value, "model_dump") and not isinstance(value, dict):
        return value.model_dump()
    if isinstance(value, dict):
        return {k: as_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_plain(v) for v in value]
    return value


def first_choice(response: Any) -> Any:
    choices = field(response, "choices")
    if not choices:
        return None
    try:
        return choices[0]
    except (TypeError, IndexError, KeyError):
        return None


def finish_reason(response: Any) -> str | None:
    reason = field(first_choice(response), "finish_reason")
    return reason if isinstance(reason, str) else None


def response_messages(response: Any, message_type: MessageType) -> Messages:
    """The reply as completion messages: one assistant message (chat) or the text (completion).

    Tool calls become plain dicts (``id``, ``type``, ``function``) and reasoning fields are kept,
    so a saved conversation replays exactly.
    """
    choice = first_choice(response)
    if message_type == "completion":
        text = field(choice, "text", "")
        return text if isinstance(text, str) else str(text)
    message = field(choice, "message")
    content = field(message, "content", "")
    out: dict[str, Any] = {"role": "assistant", "content": content}
    tool_calls = field(message, "tool_calls")
    if tool_calls:
        out["tool_calls"] = [as_plain(call) for call in tool_calls]
    for key in ("reasoning_content", "reasoning"):
        value = field(message, key)
        if isinstance(value, str) and value:
            out[key] = value
    # a MessageDict is a ChatMessage that also reads by attribute
    return cast("list[ChatMessage]", [MessageDict(out)])


def response_usage(response: Any) -> tuple[int, int]:
    usage = field(response, "usage")
    prompt, completion = field(usage, "prompt_tokens", 0), field(usage, "completion_tokens", 0)
    return (
        int(prompt) if isinstance(prompt, int | float) else 0,
        int(completion) if isinstance(completion, int | float) else 0,
    )


def _logprob_values(logprobs: Any) -> tuple[list[float] | None, list[int] | None]:
    """Per-token logprobs, and token ids when the server encoded them as ``token_id:N``."""
    content = field(logprobs, "content")
    if isinstance(content, list):
        values = [float(field(t, "logprob", 0.0)) for t in content]
        ids = None
        if content and str(field(content[0], "token", "")).startswith("token_id:"):
            ids = [int(str(field(t, "token")).split(":", 1)[1]) for t in content]
        return values, ids
    token_logprobs = field(logprobs, "token_logprobs")
    if isinstance(token_logprobs, list):
        return [float(x or 0.0) for x in token_logprobs], None
    return None, None


def response_tokens(
    response: Any, message_type: MessageType = "chat", max_seq_len: int | None = None
) -> TrajectoryStepTokens | None:
    """Token ids, masks and logprobs when the server returned them (vLLM's fields), else None.

    With ``max_seq_len``, a sequence that does not fit is cut there and marked truncated (an
    overlong prompt keeps no completion tokens).
    """
    choice = first_choice(response)
    completion_ids = field(choice, "token_ids")
    prompt_ids = field(response, "prompt_token_ids") or field(choice, "prompt_token_ids")
    logprobs, ids_from_logprobs = _logprob_values(field(choice, "logprobs"))
    if not isinstance(completion_ids, list | tuple):
        completion_ids = ids_from_logprobs
    if not isinstance(completion_ids, list | tuple) or not isinstance(prompt_ids, list | tuple):
        return None
    prompt_ids, completion_ids = list(prompt_ids), list(completion_ids)
    completion_logprobs = logprobs if logprobs is not None else [0.0] * len(completion_ids)
    overlong_prompt = is_truncated = False
    if max_seq_len is not None:
        if len(prompt_ids) > max_seq_len:
            overlong_prompt = is_truncated = True
            prompt_ids, completion_ids, completion_logprobs = prompt_ids[:max_seq_len], [], []
        elif len(prompt_ids) + len(completion_ids) > max_seq_len:
            is_truncated = True
            keep = max_seq_len - len(prompt_ids)
            completion_ids, completion_logprobs = completion_ids[:keep], completion_logprobs[:keep]
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": [0] * len(prompt_ids),
        "completion_ids": completion_ids,
        "completion_mask": [1] * len(completion_ids),
        "completion_logprobs": completion_logprobs,
        "overlong_prompt": overlong_prompt,
        "is_truncated": is_truncated,
    }
