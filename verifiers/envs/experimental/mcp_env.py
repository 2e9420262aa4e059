"""MCPEnv: the tools of MCP servers (stdio) as a ``ToolEnv`` (needs the ``mcp`` extra).

Each configured server is started once, when the environment is built, in a background event
loop of its own (MCP sessions are bound to the loop that opened them; rollouts run on the
caller's); its tools are listed and offered to the model under their own names and schemas. The
servers are meant to be shared by all rollouts (read-only tools); they stop at teardown.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from verifiers.decorators import teardown
from verifiers.envs.tool_env import ToolEnv
from verifiers.messages.models import Tool


@dataclass
class MCPServerConfig:
    name: str
    command: str
    args: list[str] | None = None
    env: dict[str, str] | None = None
    description: str = ""


def _mcp() -> Any:
    try:
        import mcp
        import mcp.client.stdio
    except ImportError as exc:  # pragma: no cover - depends on the optional extra
        from verifiers.installs.extras import install_hint

        raise ImportError(f"MCPEnv needs the MCP SDK: {install_hint('mcp', 'mcp<2')}") from exc
    return mcp


class MCPServerConnection:
    """One running server: its session lives in a task on the background loop until closed."""

    def __init__(self, config: MCPServerConfig) -> None:
        self.config = config
        self.session: Any = None
        self.tools: dict[str, Any] = {}
        self._ready = asyncio.Event()
        self._closed = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None

    async def connect(self) -> dict[str, Any]:
        self._task = asyncio.create_task(self._serve())
        await self._ready.wait()
        if self._error is not None:
            raise RuntimeError(
                f"MCP server {self.config.name!r} ({self.config.command}) failed to start: "
                f"{type(self._error).__name__}: {self._error}"
            ) from self._error
        return self.tools

    async def _serve(self) -> None:
        mcp = _mcp()
        params = mcp.StdioServerParameters(
            command=self.config.command, args=self.config.args or [], env=self.config.env
        )
        try:
            async with mcp.client.stdio.stdio_client(params) as (read, write):
                async with mcp.ClientSession(read, write) as session:
                    await session.initialize()
                    self.tools = {t.name: t for t in (await session.list_tools()).tools}
                    self.session = session
                    self._ready.set()
                    await self._closed.wait()
        except Exception as exc:
            self._error = exc
        finally:
            self.session = None
            self._ready.set()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        if self.session is None:
            raise RuntimeError(f"MCP server {self.config.name!r} is not connected")
        result = await self.session.call_tool(name, arguments=arguments)
        parts = [getattr(item, "text", None) or str(item) for item in result.content or []]
        return "\n".join(parts) if parts else "No result returned from tool"

    async def disconnect(self) -> None:
        self._closed.set()
        if self._task is not None:
            await self._task


class MCPToolWrapper:
    """An MCP tool as a callable ToolEnv can offer (name, description, JSON schema)."""

    def __init__(self, server_name: str, tool: Any, connection: MCPServerConnection, loop: Any) -> None:
        self.server_name = server_name
        self.tool = tool
        self.connection = connection
        self.loop = loop
        self.__name__ = tool.name
        self.__doc__ = tool.description or ""

    async def __call__(self, **kwargs: Any) -> str:
        future = asyncio.run_coroutine_threadsafe(
            self.connection.call_tool(self.tool.name, kwargs), self.loop
        )
        return await asyncio.wrap_future(future)

    def to_tool_def(self) -> Tool:
        return Tool(
            name=self.__name__,
            description=self.__doc__ or "",
            parameters=self.tool.inputSchema or {"type": "object", "properties": {}},
        )


class MCPEnv(ToolEnv):
    def __init__(
        self,
        mcp_servers: list[MCPServerConfig | dict[str, Any]] | None = None,
        max_turns: int = 10,
        error_formatter: Callable[[Exception], str] = lambda e: f"Error: {e}",
        **kwargs: Any,
    ) -> None:
        self.mcp_servers = [
            s if isinstance(s, MCPServerConfig) else MCPServerConfig(**s) for s in mcp_servers or []
        ]
        self.server_connections: dict[str, MCPServerConnection] = {}
        self.mcp_tools: dict[str, MCPToolWrapper] = {}
        super().__init__(tools=[], max_turns=max_turns, error_formatter=error_formatter, **kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-servers", daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._connect(), self._loop).result()

    async def _connect(self) -> None:
        for config in self.mcp_servers:
            connection = MCPServerConnection(config)
            tools = await connection.connect()
            self.server_connections[config.name] = connection
            for tool in tools.values():
                wrapper = MCPToolWrapper(config.name, tool, connection, self._loop)
                self.mcp_tools[wrapper.__name__] = wrapper
        wrappers = list(self.mcp_tools.values())
        self.tools = list(wrappers)
        self.tool_map = {w.__name__: w for w in wrappers}
        schemas = [w.to_tool_def() for w in wrappers]
        if self.release.typed_messages:
            self.tool_defs = schemas
        else:
            from verifiers.messages.convert import wire_tool

            self.oai_tools = [wire_tool(t) for t in schemas]
        if self.tool_monitor_rubric is not None:
            for name in self.tool_map:
                self.tool_monitor_rubric.add_tool_metric(name)

    async def call_tool(
        self, tool_name: str, tool_args: dict[str, Any], tool_call_id: str, **kwargs: Any
    ) -> Any:
        wrapper = self.tool_map.get(tool_name)
        if wrapper is None:
            return self.tool_message(f"Error: Tool '{tool_name}' not found", tool_call_id)
        try:
            content = str(await wrapper(**tool_args))
        except Exception as exc:
            content = self.error_formatter(exc)
        return self.tool_message(content, tool_call_id)

    @teardown
    async def teardown_mcp_servers(self) -> None:
        for connection in self.server_connections.values():
            future = asyncio.run_coroutine_threadsafe(connection.disconnect(), self._loop)
            await asyncio.wrap_future(future)
        self.server_connections.clear()
        self.mcp_tools.clear()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


__all__ = ["MCPEnv", "MCPServerConfig", "MCPServerConnection", "MCPToolWrapper"]
