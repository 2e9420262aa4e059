"""ToolEnv: the model calls Python functions; the rollout ends when it answers without tools."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verifiers.decorators import stop
from verifiers.envs.multiturn_env import MultiTurnEnv
from verifiers.tools.calls import DEFAULT_MAX_OUTPUT_CHARS, execute_tool_calls
from verifiers.tools.schema import ToolSpec, tool_spec
from verifiers.types import Messages, State


class ToolEnv(MultiTurnEnv):
    """``tools`` are plain functions (sync or async) with type hints and docstrings.

    Calls in one assistant message run concurrently (sync tools in threads). Per-example tool
    lists (``info["oai_tools"]``) restrict which tools a rollout may call. Tool outputs longer than
    ``max_output_chars`` are truncated with a note.
    """

    def __init__(
        self,
        tools: list[Callable[..., Any]] | None = None,
        max_turns: int = 10,
        max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
        **kwargs: Any,
    ) -> None:
        self.tool_specs: dict[str, ToolSpec] = {}
        self.max_output_chars = max_output_chars
        for tool in tools or []:
            self._register(tool_spec(tool))
        super().__init__(max_turns=max_turns, oai_tools=self.oai_tools or None, **kwargs)

    @property
    def tools(self) -> list[Callable[..., Any]]:
        return [spec.func for spec in self.tool_specs.values()]

    @property
    def tool_map(self) -> dict[str, Callable[..., Any]]:
        return {name: spec.func for name, spec in self.tool_specs.items()}

    @property
    def oai_tools(self) -> list[dict[str, Any]]:
        return [spec.schema for spec in self.tool_specs.values()]

    @oai_tools.setter
    def oai_tools(self, value: Any) -> None:
        # Environment.__init__ assigns oai_tools; here the schemas are derived from the tools.
        pass

    def _register(self, spec: ToolSpec) -> None:
        if spec.name in self.tool_specs:
            raise ValueError(f"two tools are named {spec.name!r}")
        self.tool_specs[spec.name] = spec

    def add_tool(self, tool: Callable[..., Any], args_to_skip: list[str] | None = None) -> None:
        self._register(tool_spec(tool, args_to_skip or []))

    def remove_tool(self, tool: Callable[..., Any] | str) -> None:
        self.tool_specs.pop(tool if isinstance(tool, str) else tool.__name__, None)

    def init_state(self, input, client, model, sampling_args) -> State:
        state = super().init_state(input, client, model, sampling_args)
        state["oai_tools"] = state.get("oai_tools") or self.oai_tools or None
        state["tool_calls_made"] = {}
        return state

    def allowed_tools(self, state: State) -> dict[str, ToolSpec]:
        """The tools this rollout may call: all, or the per-example list in ``info["oai_tools"]``."""
        listed = state.get("oai_tools")
        if not listed:
            return self.tool_specs
        names = {t.get("function", {}).get("name") for t in listed}
        return {name: spec for name, spec in self.tool_specs.items() if name in names}

    @stop
    async def no_tools_called(self, state: State) -> bool:
        completion = state.get("completion")
        if not completion or not isinstance(completion, list):
            return False
        last = completion[-1]
        return last.get("role") == "assistant" and not last.get("tool_calls")

    async def prepare_tool_args(
        self, tool_name: str, tool_args: dict[str, Any], messages: Messages, state: State
    ) -> dict[str, Any]:
        return tool_args

    async def env_response(self, messages: Messages, state: State, **kwargs: Any) -> Messages:
        calls = messages[-1].get("tool_calls") or [] if isinstance(messages, list) else []
        counts = state["tool_calls_made"]
        for call in calls:
            name = (call.get("function") or {}).get("name") or "?"
            counts[name] = counts.get(name, 0) + 1

        async def prepare(name: str, args: dict[str, Any]) -> dict[str, Any]:
            return await self.prepare_tool_args(name, args, messages, state)

        return await execute_tool_calls(
            calls,
            self.allowed_tools(state),
            max_output_chars=self.max_output_chars,
            prepare=prepare,
        )
