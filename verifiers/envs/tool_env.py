"""ToolEnv: the model calls Python functions; the rollout ends when it answers without tools.

The classic attributes are plain and assignable (``tools``, ``tool_map``, and ``oai_tools`` or
``tool_defs`` by release), so a subclass that fills them itself (an MCP client, a remote tool
server) works; ``call_tool`` is the override point for how one call runs.

From verifiers 0.1.9 on, a ``ToolMonitorRubric`` adds ``total_tool_calls`` and ``<tool>_calls``
metrics. ``stop_errors`` (0.1.11+) names exception types that end the rollout instead of being
reported back to the model (as ``vf.ToolParseError`` / ``vf.ToolCallError``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from verifiers.concurrency import maybe_await
from verifiers.decorators import stop
from verifiers.envs.multiturn_env import MultiTurnEnv
from verifiers.errors import ToolCallError, ToolParseError
from verifiers.messages.convert import message_field, message_role, tool_from_raw
from verifiers.messages.dicts import MessageDict
from verifiers.messages.models import ToolMessage
from verifiers.rubrics.rubric import Rubric
from verifiers.tools.calls import DEFAULT_MAX_OUTPUT_CHARS, format_output, parse_arguments
from verifiers.tools.schema import ToolSpec, tool_spec
from verifiers.types import Messages, State


def _is_async(func: Any) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)


def tool_name(tool: Any) -> str:
    return getattr(tool, "__name__", None) or type(tool).__name__


def call_parts(call: Any) -> tuple[str, str, Any]:
    """(id, function name, raw arguments) of a tool call in any shape (typed, OpenAI dict)."""
    call_id = message_field(call, "id", "") or ""
    name = message_field(call, "name")
    arguments = message_field(call, "arguments")
    if name is None:
        function = message_field(call, "function") or {}
        name, arguments = message_field(function, "name", ""), message_field(function, "arguments")
    return str(call_id), str(name or ""), arguments


def tool_calls_of(messages: Iterable[Any]) -> list[Any]:
    calls: list[Any] = []
    for message in messages:
        if message_role(message) == "assistant":
            calls.extend(message_field(message, "tool_calls") or [])
    return calls


class ToolMonitorRubric(Rubric):
    """``total_tool_calls`` and one ``<tool>_calls`` metric per tool (weight 0)."""

    score_errored_rollouts = True

    def __init__(self, tool_names: list[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tool_names: list[str] = []
        self.add_metric(self.total_tool_calls)
        for name in tool_names or []:
            self.add_tool_metric(name)

    async def total_tool_calls(self, completion: Messages) -> float:
        return float(len(tool_calls_of(completion if isinstance(completion, list) else [])))

    def add_tool_metric(self, name: str) -> None:
        if name in self.tool_names:
            return
        self.tool_names.append(name)

        async def count(completion: Messages) -> float:
            calls = tool_calls_of(completion if isinstance(completion, list) else [])
            return float(sum(1 for call in calls if call_parts(call)[1] == name))

        count.__name__ = f"{name}_calls"
        self.add_metric(count)

    def remove_tool_metric(self, name: str) -> None:
        if name not in self.tool_names:
            return
        self.tool_names.remove(name)
        for i, func in enumerate(self.funcs):
            if getattr(func, "__name__", "") == f"{name}_calls":
                del self.funcs[i], self.weights[i], self._signatures[i]
                break


class ToolEnv(MultiTurnEnv):
    """``tools`` are plain functions (sync or async) with type hints and docstrings.

    As in the classic SDK, the calls of one assistant message run one after another, sync tools
    on the event loop's thread (a tool may hold a SQLite connection or other thread-bound state),
    with the decoded arguments as they are; Python's own ``TypeError`` reports missing or extra
    ones. ``parallel_tool_calls=True`` runs them concurrently instead (sync tools in threads);
    ``validate_tool_args=True`` checks and coerces arguments against the schema first. Malformed
    JSON, unknown tools, bad arguments and exceptions come back to the model as tool messages
    (``error_formatter`` words them), unless their type is in ``stop_errors``. A tool's output is
    sent whole unless ``max_output_chars`` cuts it. Per-example tool lists
    (``info["oai_tools"]`` / ``info["tool_defs"]``) restrict which tools a rollout may call.
    """

    def __init__(
        self,
        tools: list[Callable[..., Any]] | None = None,
        max_turns: int = 10,
        error_formatter: Callable[[Exception], str] = lambda e: f"{e}",
        stop_errors: list[type[Exception]] | None = None,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
        parallel_tool_calls: bool = False,
        validate_tool_args: bool = False,
        **kwargs: Any,
    ) -> None:
        self.tools: list[Callable[..., Any]] = list(tools or [])
        self.parallel_tool_calls = parallel_tool_calls
        self.validate_tool_args = validate_tool_args
        self.error_formatter = error_formatter
        self.stop_errors: list[type[Exception]] = list(stop_errors or [])
        self.max_output_chars = max_output_chars
        self.tool_specs: dict[str, ToolSpec] = {}
        self.tool_map: dict[str, Callable[..., Any]] = {}
        self.tool_monitor_rubric: ToolMonitorRubric | None = None
        schemas = [self._register(tool).schema for tool in self.tools]
        self.max_turns = max_turns
        super().__init__(max_turns=max_turns, **kwargs)
        self._set_tool_schemas(schemas)
        if self.release.monitor_metrics:
            self.tool_monitor_rubric = ToolMonitorRubric(tool_names=list(self.tool_map))
            self.add_rubric(self.tool_monitor_rubric)

    def _set_tool_schemas(self, schemas: list[Any]) -> None:
        if self.release.typed_messages:
            tools = [tool_from_raw(s) for s in schemas]
            if self.release.strict_tool_defs:
                tools = [
                    t if t.strict is not None else t.model_copy(update={"strict": True})
                    for t in tools
                ]
            self.tool_defs = tools
        else:
            self.oai_tools = list(schemas)

    def _register(
        self, tool: Callable[..., Any], args_to_skip: list[str] | None = None
    ) -> ToolSpec:
        name = tool_name(tool)
        if name in self.tool_map:
            raise ValueError(f"two tools are named {name!r}")
        spec = tool_spec(tool, args_to_skip or [])
        self.tool_specs[name] = spec
        self.tool_map[name] = tool
        return spec

    def _schemas(self) -> list[Any]:
        return (
            list(self.tool_defs or [])
            if self.release.typed_messages
            else list(self.oai_tools or [])
        )

    def add_tool(self, tool: Callable[..., Any], args_to_skip: list[str] | None = None) -> None:
        spec = self._register(tool, args_to_skip)
        if tool not in self.tools:
            self.tools.append(tool)
        self._set_tool_schemas([*self._schemas(), spec.schema])
        if self.tool_monitor_rubric is not None:
            self.tool_monitor_rubric.add_tool_metric(spec.name)

    def remove_tool(self, tool: Callable[..., Any] | str) -> None:
        name = tool if isinstance(tool, str) else tool_name(tool)
        func = self.tool_map.pop(name, None)
        self.tool_specs.pop(name, None)
        self.tools = [t for t in self.tools if t is not func]
        self._set_tool_schemas([s for s in self._schemas() if tool_from_raw(s).name != name])
        if self.tool_monitor_rubric is not None:
            self.tool_monitor_rubric.remove_tool_metric(name)

    def allowed_tool_names(self, state: State) -> set[str] | None:
        """Names this rollout may call (None: no restriction beyond ``tool_map``)."""
        listed = state.get("tool_defs") if self.release.typed_messages else state.get("oai_tools")
        if not listed:
            return None
        return {tool_from_raw(t).name for t in listed}

    @stop
    async def no_tools_called(self, state: State) -> bool:
        if not state["trajectory"]:
            return False
        completion = state["trajectory"][-1]["completion"]
        if not isinstance(completion, list) or not completion:
            return False
        last = completion[-1]
        return message_role(last) == "assistant" and not message_field(last, "tool_calls")

    def tool_message(self, content: Any, tool_call_id: str) -> Any:
        """A tool reply in this release's message form."""
        if self.release.typed_messages:
            return ToolMessage(content=content, tool_call_id=tool_call_id)
        return MessageDict(role="tool", content=content, tool_call_id=tool_call_id)

    def _should_stop(self, exc: BaseException) -> bool:
        cause: BaseException | None = exc
        while cause is not None:
            if any(isinstance(cause, kind) for kind in self.stop_errors):
                return True
            cause = cause.__cause__
        return False

    async def call_tool(
        self, tool_name: str, tool_args: dict[str, Any], tool_call_id: str, **kwargs: Any
    ) -> Any:
        """Run one tool call and answer with its tool message; failures become the message,
        or end the rollout when their type is in ``stop_errors``."""
        try:
            func = self.tool_map.get(tool_name)
            if func is None:
                available = ", ".join(sorted(self.tool_map)) or "none"
                raise ToolCallError(f"unknown tool {tool_name!r}; available tools: {available}")
            spec = self.tool_specs.get(tool_name)
            if spec is not None and spec.func is func and self.validate_tool_args:
                tool_args = spec.validate(tool_args)
            if self.parallel_tool_calls and not _is_async(func):
                result = await asyncio.to_thread(func, **tool_args)
            else:
                result = await maybe_await(func, **tool_args)
            content = format_output(result, self.max_output_chars)
        except Exception as exc:  # the model sees what went wrong and can correct itself
            if self._should_stop(exc):
                raise ToolCallError(f"{tool_name} raised {type(exc).__name__}: {exc}") from exc
            content = self.error_formatter(exc)
        return self.tool_message(content, tool_call_id)

    async def prepare_tool_args(
        self, tool_name: str, tool_args: dict[str, Any], messages: Messages, state: State
    ) -> dict[str, Any]:
        return tool_args

    async def _one_call(self, call: Any, messages: Messages, state: State) -> Any:
        call_id, name, raw_arguments = call_parts(call)
        try:
            allowed = self.allowed_tool_names(state)
            if allowed is not None and name not in allowed:
                available = ", ".join(sorted(n for n in allowed if n)) or "none"
                raise ToolCallError(f"unknown tool {name!r}; available tools: {available}")
            args = parse_arguments(raw_arguments)
            spec = self.tool_specs.get(name)
            if spec is not None:
                args = {k: v for k, v in args.items() if k not in spec.hidden}
        except Exception as exc:
            if self._should_stop(exc):
                raise ToolParseError(f"tool call {name!r}: {exc}") from exc
            return self.tool_message(self.error_formatter(exc), call_id)
        args = await self.prepare_tool_args(name, args, messages, state)
        return await self.call_tool(name, args, call_id)

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Messages:
        if not isinstance(messages, list) or not messages:
            return []
        calls = message_field(messages[-1], "tool_calls") or []
        if self.parallel_tool_calls:
            return list(await asyncio.gather(*(self._one_call(c, messages, state) for c in calls)))
        return [await self._one_call(c, messages, state) for c in calls]
