"""Conversations → token ids with a loss mask on the assistant's tokens only, by the chat template.

The mask is found by rendering prefixes: the tokens of assistant message i are those that
``render(messages[:i+1])`` adds to ``render(messages[:i], add_generation_prompt=True)`` — its
content and the template's end-of-turn tokens, so the model learns to stop. Every assistant turn
of a multi-turn conversation is trained; system, user and tool messages are context. A template
whose prefixes do not render as prefixes of the whole conversation cannot be masked this way and
is refused (TemplateError) rather than trained on the wrong tokens.
"""

from __future__ import annotations

import json
from typing import Any

from verifiers.errors import VFError


class TemplateError(VFError, ValueError):
    """The chat template does not render a conversation's prefixes consistently."""


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as chat templates expect them: empty tool fields dropped, arguments as dicts."""
    out = []
    for message in messages:
        clean = {"role": message["role"], "content": message.get("content") or ""}
        calls = [
            {
                **call,
                "function": {
                    **call["function"],
                    "arguments": _as_dict(call["function"].get("arguments")),
                },
            }
            for call in message.get("tool_calls") or []
        ]
        if calls:
            clean["tool_calls"] = calls
        for key in ("tool_call_id", "name"):
            if message.get(key):
                clean[key] = message[key]
        out.append(clean)
    return out


def _as_dict(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return arguments
    return arguments


def render_ids(
    tokenizer: Any, messages: list[dict[str, Any]], generation_prompt: bool
) -> list[int]:
    text = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=generation_prompt
    )
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def assistant_masked(tokenizer: Any, messages: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """(token ids of the whole conversation, 1 on assistant tokens and 0 elsewhere)."""
    messages = template_messages(messages)
    ids = render_ids(tokenizer, messages, generation_prompt=False)
    mask = [0] * len(ids)
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = render_ids(tokenizer, messages[:index], generation_prompt=True)
        through = render_ids(tokenizer, messages[: index + 1], generation_prompt=False)
        if through[: len(before)] != before or ids[: len(through)] != through:
            raise TemplateError(
                f"the chat template renders message {index} differently as a prefix than in the "
                "whole conversation, so its assistant tokens cannot be located exactly"
            )
        mask[len(before) : len(through)] = [1] * (len(through) - len(before))
    return ids, mask
