"""Python tools a taskset offers the model: a ``Toolset`` subclass whose ``@vf.tool`` methods
(their docstrings the descriptions, their annotated parameters the JSON schema) are offered as
``<prefix>_<name>``. ``Task.toolsets`` / ``Taskset.toolsets`` return the instances a rollout gets.

Where the tools run is the toolset's config, as upstream places them: ``colocated`` calls the
methods in-process beside the harness, with ``self.state`` the calling rollout's state;
otherwise the toolset is served as an MCP server (``Toolset.run``, ``verifiers.v1.mcp``) in a
local child process for the rollout (for a ``SharedToolsetConfig`` one process for the whole run,
``Env.serving``), and ``url`` names an MCP server already running anywhere
(any MCP server, not only a ``Toolset``). A served toolset's typed state travels with each call
(the ``vf_state`` field of the MCP request's and result's ``_meta``), so ``self.state`` writes
reach the trace either way.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import inspect
import re
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic

from pydantic import ConfigDict, TypeAdapter, create_model
from typing_extensions import TypeVar

from verifiers.tools.schema import signature_fields
from verifiers.v1.hooks import hooks_of
from verifiers.v1.state import State, StateT, state_cls
from verifiers.v1.tool_parts import (
    SharedToolsetConfig,
    ToolsetConfig,
    tool_result_content,
    tool_result_text,
)
from verifiers.v1.types import Tool

__all__ = [
    "BoundTool",
    "PythonTool",
    "SharedToolsetConfig",
    "Toolset",
    "ToolsetConfig",
    "ToolsetConfigT",
    "tool_result_content",
    "tool_result_text",
]


ToolsetConfigT = TypeVar(
    "ToolsetConfigT", bound=ToolsetConfig | SharedToolsetConfig, default=ToolsetConfig
)

_current_state: contextvars.ContextVar[State | None] = contextvars.ContextVar(
    "vf_toolset_state", default=None
)


@dataclass
class BoundTool:
    """One tool as the model sees it; ``call`` runs it for a rollout whose state is ``state``."""

    spec: Tool

    async def call(self, arguments: dict[str, Any], state: State) -> Any:
        raise NotImplementedError


@dataclass
class PythonTool(BoundTool):
    """A ``@vf.tool`` method called in-process."""

    fn: Callable[..., Any]
    toolset: Toolset[Any, Any]
    validate: TypeAdapter[Any]

    async def call(self, arguments: dict[str, Any], state: State) -> Any:
        kwargs = self.validate.validate_python(arguments)
        token = _current_state.set(state)
        try:
            result = self.fn(**dict(kwargs))
            return await result if inspect.isawaitable(result) else result
        finally:
            _current_state.reset(token)


_parts: weakref.WeakKeyDictionary[Callable[..., Any], tuple[dict[str, Any], TypeAdapter[Any]]] = (
    weakref.WeakKeyDictionary()
)


def _tool_parts(fn: Callable[..., Any]) -> tuple[dict[str, Any], TypeAdapter[Any]]:
    """A tool method's JSON schema and argument validator, built once per function: a rollout
    gets fresh toolsets, and building the pydantic model anew cost more CPU than the rest of
    a tool rollout's client side (the schema depends on the signature only, not the instance)."""
    func = getattr(fn, "__func__", fn)
    parts = _parts.get(func)
    if parts is None:
        model = _schema_model(fn)
        schema = model.model_json_schema()
        schema.pop("title", None)
        parts = _parts[func] = (schema, TypeAdapter(model))
    return _copy_schema(parts[0]), parts[1]


@functools.lru_cache(maxsize=1024)
def _cleandoc(doc: str) -> str:
    return inspect.cleandoc(doc)


def _description(fn: Callable[..., Any]) -> str:
    """A tool method's docstring as its description, cleaned once per docstring (each rollout
    gets fresh toolsets, and ``inspect.cleandoc`` per tool was a share of their CPU)."""
    doc = fn.__doc__
    return _cleandoc(doc) if doc else ""


def _copy_schema(value: Any) -> Any:
    """A deep copy of a JSON schema (dicts, lists and scalars; anything else by
    ``copy.deepcopy``): each rollout's tools get their own, and ``copy.deepcopy``'s memo
    made this copy most of a tool rollout's toolset CPU."""
    if type(value) is dict:
        return {k: _copy_schema(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy_schema(v) for v in value]
    if value is None or type(value) in (str, int, float, bool):
        return value
    return copy.deepcopy(value)


def _schema_model(fn: Callable[..., Any]) -> type[Any]:
    """The model that both makes a tool's JSON schema and checks the model's arguments; its
    fields come from the classic ``tool_spec``'s reading of a signature, so both resolve hints
    the same way."""
    return create_model(
        f"{fn.__name__}_arguments",
        __config__=ConfigDict(extra="forbid"),
        **signature_fields(fn),
    )


class Toolset(Generic[ToolsetConfigT, StateT]):
    TOOL_PREFIX: ClassVar[str | None] = ""
    """The tools' name prefix: empty uses the class name in snake case; None offers them bare."""

    def __init__(self, config: ToolsetConfigT | None = None) -> None:
        self.config: ToolsetConfigT = config if config is not None else ToolsetConfig()  # type: ignore[assignment]  # the default ToolsetConfigT
        self._inert: State | None = None  # made when first read outside a call (rarely)

    async def setup(self) -> None:
        """Task-agnostic preparation (an index, a corpus), run once per server before it
        serves, and once per rollout for tools called in-process: override it."""

    @property
    def state(self) -> StateT:
        """The state of the rollout calling the tool (an unshared blank outside a call)."""
        current = _current_state.get()
        if current is not None:
            return current  # type: ignore[return-value]  # the rollout's state is the task's StateT
        if self._inert is None:  # made on demand: a blank per toolset was a State per rollout
            self._inert = state_cls(type(self))()
        return self._inert  # type: ignore[return-value]  # the toolset's own StateT

    @property
    def prefix(self) -> str:
        if self.TOOL_PREFIX is None:
            return ""
        return (
            self.TOOL_PREFIX or re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", type(self).__name__).lower()
        )

    def tools(self) -> list[PythonTool]:
        """The ``@vf.tool`` methods, bound for an in-process call."""
        bound: list[PythonTool] = []
        for fn in hooks_of(self, "tool"):
            name = getattr(fn, "tool_name", None) or fn.__name__
            schema, validate = _tool_parts(fn)
            spec = Tool(
                name=f"{self.prefix}_{name}" if self.prefix else name,
                description=_description(fn) or name,
                parameters=schema,
            )
            bound.append(PythonTool(spec=spec, fn=fn, toolset=self, validate=validate))
        return bound

    @classmethod
    def run(cls) -> None:
        """Serve this toolset as an MCP server (streamable HTTP at ``/mcp``) until killed: the
        entry point of a toolset placed in its own runtime (``if __name__ == "__main__":
        MyToolset.run()``, as upstream's tasksets end). Its config is the JSON in
        ``VF_CONFIG`` (defaults without it); ``MCP_HOST``/``MCP_PORT`` pick the address
        (loopback, a free port) and the port is written to ``MCP_PORT_FILE`` when set."""
        from verifiers.v1.mcp.server import serve_from_environment

        serve_from_environment(cls)
