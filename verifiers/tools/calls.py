"""Executing the model's tool calls: parse, validate, run, and always answer with a tool message.

Nothing a model sends can raise out of here: malformed or double-encoded JSON, unknown tools,
wrong argument types and exceptions inside the tool all become a tool message that tells the
model what went wrong, so it can correct itself on the next turn.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from verifiers.errors import ToolCallError  # a call that cannot run; its message goes to the model
from verifiers.tools.schema import ToolSpec

DEFAULT_MAX_OUTPUT_CHARS = 8192


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Arguments as a dict, accepting a JSON object, a double-encoded one, or an empty string."""
    value = raw
    for _ in range(2):  # some models JSON-encode the arguments string twice
        if isinstance(value, dict):
            return value
        if value is None or (isinstance(value, str) and not value.strip()):
            return {}
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ToolCallError(
                f"arguments are not valid JSON ({exc.msg} at position {exc.pos}): {raw!r:.200}"
            ) from None
    if isinstance(value, dict):
        return value
    raise ToolCallError(
        f"arguments must be a JSON object, got {type(value).__name__}: {raw!r:.200}"
    )


def format_output(result: Any, max_chars: int) -> str:
    if isinstance(result, str):
        text = result
    else:
        try:
            text = json.dumps(result, default=str)
        except (TypeError, ValueError):
            text = str(result)
    if len(text) > max_chars:
        text = (
            text[:max_chars] + f"\n...[output truncated: {len(text) - max_chars} more characters]"
        )
    return text


async def run_tool(spec: ToolSpec, args: dict[str, Any]) -> Any:
    kwargs = spec.validate(args)
    if spec.is_async:
        return await spec.func(**kwargs)
    return await asyncio.to_thread(spec.func, **kwargs)


async def execute_tool_calls(
    tool_calls: list[dict[str, Any]],
    tools: dict[str, ToolSpec],
    *,
    max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
    prepare: Callable[[str, dict[str, Any]], Any] | None = None,
) -> list[dict[str, Any]]:
    """Run all calls of one assistant message concurrently; one tool message per call, in order.

    ``prepare(name, args)`` may rewrite the arguments first (StatefulToolEnv injects state there).
    """

    async def one(call: dict[str, Any]) -> dict[str, Any]:
        call_id = call.get("id") or ""
        function = call.get("function") or {}
        name = function.get("name")
        try:
            if name not in tools:
                available = ", ".join(sorted(tools)) or "none"
                raise ToolCallError(f"unknown tool {name!r}; available tools: {available}")
            args = parse_arguments(function.get("arguments"))
            spec = tools[name]
            args = {k: v for k, v in args.items() if k not in spec.hidden}
            if prepare is not None:
                prepared = prepare(name, args)
                if asyncio.iscoroutine(prepared):
                    prepared = await prepared
                args = prepared
            result = await run_tool(spec, args)
            content = format_output(result, max_output_chars)
        except (ToolCallError, ValueError) as exc:
            content = f"Error: {exc}"
        except Exception as exc:  # the tool itself failed: the model sees why
            content = f"Error: {name} raised {type(exc).__name__}: {exc}"
        return {"role": "tool", "tool_call_id": call_id, "name": name or "", "content": content}

    return list(await asyncio.gather(*(one(call) for call in tool_calls)))
