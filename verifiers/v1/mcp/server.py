"""Serving a ``Toolset`` as an MCP server: streamable HTTP at ``/mcp`` on loopback (stateless,
JSON responses), its ``@vf.tool`` methods advertised by their bare names (the client adds the
toolset's prefix, as upstream's harnesses do).

The calling rollout's typed state rides each call: the request's ``_meta`` carries it as
``vf_state`` and the result's ``_meta`` hands it back after the tool ran, so a tool's
``self.state`` writes reach the trace with no channel beside the MCP session itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifiers.v1.configs.base import BaseConfig
from verifiers.v1.generics import concrete_type
from verifiers.v1.state import State, state_cls
from verifiers.v1.tool_parts import tool_result_text

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from mcp.server.lowlevel import Server

Toolset = Any
"""A ``verifiers.v1.toolset.Toolset`` (its class or an instance): not imported, since
``Toolset.run`` starts this server (``verifiers.v1.tool_parts`` holds what both need)."""

STATE_KEY = "vf_state"
"""The ``_meta`` field that carries a rollout's state to a served tool and back."""

KEY_ENV = "VF_TOOLSET_KEY"
"""Where a served toolset finds the key its clients must send (``serve_from_environment``)."""


def state_payload(state: State) -> dict[str, Any]:
    """A rollout's state as it travels to a served tool (its artifacts, bytes, stay home)."""
    return state.model_dump(mode="json", exclude={"artifacts"})


def mcp_missing(what: str) -> ImportError:
    from verifiers.installs.extras import install_hint

    return ImportError(f"{what} needs the MCP SDK: {install_hint('mcp', 'mcp<2')}")


def bare_name(toolset: Toolset, offered: str) -> str:
    """A tool's name on the server: the name the model is offered, less the toolset's prefix."""
    prefix = toolset.prefix
    return offered.removeprefix(f"{prefix}_") if prefix else offered


def build_server(toolset: Toolset) -> Server[Any, Any]:
    """The MCP server of ``toolset``'s tools (arguments checked by the tool's own schema model,
    so a bad call reads the same as in-process)."""
    try:
        import mcp.types as types
        from mcp.server.lowlevel import Server
    except ImportError as e:  # pragma: no cover - depends on the optional extra
        raise mcp_missing("serving a toolset") from e

    server: Server[Any, Any] = Server(toolset.prefix or type(toolset).__name__)
    tools = {bare_name(toolset, t.spec.name): t for t in toolset.tools()}
    state_type = state_cls(type(toolset))

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(name=name, description=t.spec.description, inputSchema=t.spec.parameters)
            for name, t in tools.items()
        ]

    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        tool = tools.get(name)
        if tool is None:
            raise ValueError(f"no tool named {name!r} (tools: {sorted(tools)})")
        meta = server.request_context.meta
        sent = (meta.model_extra or {}).get(STATE_KEY) if meta is not None else None
        state: State = state_type.model_validate(sent) if sent is not None else state_type()
        result = await tool.call(arguments, state)
        if (
            isinstance(result, list)
            and result
            and all(isinstance(block, types.TextContent | types.ImageContent) for block in result)
        ):
            content: list[Any] = result
        else:
            content = [types.TextContent(type="text", text=tool_result_text(result))]
        back = {STATE_KEY: state_payload(state)} if sent is not None else None
        return types.CallToolResult(content=content, _meta=back)

    return server


async def serve(toolset: Toolset, sock: socket.socket, api_key: str | None = None) -> None:
    """Serve ``toolset`` on the bound ``sock`` until cancelled; with ``api_key``, a request
    without ``Authorization: Bearer KEY`` is a 401 before its body is read. A request's headers
    and body have ``READ_TIMEOUT_S`` each, as at every server of this SDK."""
    try:
        import uvicorn
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from starlette.applications import Starlette
        from starlette.routing import Route

        from verifiers.asgi.deadlines import READ_TIMEOUT_S, header_timeout_protocol
        from verifiers.asgi.json_api import APIKeyCheck
    except ImportError as e:  # pragma: no cover - depends on the optional extra
        raise mcp_missing("serving a toolset") from e

    manager = StreamableHTTPSessionManager(
        app=build_server(toolset), json_response=True, stateless=True
    )

    class Endpoint:  # an ASGI app, so Starlette routes to it as is
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            await manager.handle_request(scope, receive, send)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    await toolset.setup()  # after the port is known: a slow setup does not hide the port
    app = Starlette(routes=[Route("/mcp", endpoint=Endpoint())], lifespan=lifespan)
    if api_key:
        app.add_middleware(APIKeyCheck, api_key=api_key)
    config = uvicorn.Config(
        app, log_level="warning", lifespan="on", http=header_timeout_protocol(READ_TIMEOUT_S)
    )
    await uvicorn.Server(config).serve(sockets=[sock])


def serve_from_environment(cls: type[Toolset]) -> None:
    """``Toolset.run``: the config from ``VF_CONFIG`` (JSON), the address from ``MCP_HOST`` /
    ``MCP_PORT`` (loopback, any free port), the bound port written to ``MCP_PORT_FILE`` once it
    accepts connections, and the key every request must carry from ``VF_TOOLSET_KEY`` (the SDK
    makes one for each server it launches: any local user reaches a loopback port), taken out
    of the environment the tools run in."""
    from verifiers.v1.tool_parts import ToolsetConfig

    config_type = concrete_type(cls, BaseConfig) or ToolsetConfig
    raw = os.environ.get("VF_CONFIG")
    config = config_type.model_validate(json.loads(raw)) if raw else config_type()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((os.environ.get("MCP_HOST", "127.0.0.1"), int(os.environ.get("MCP_PORT", "0"))))
    sock.listen(2048)  # connections made once the port is known queue until uvicorn serves
    port_file = os.environ.get("MCP_PORT_FILE")
    if port_file:
        write_port_file(Path(port_file), sock.getsockname()[1])
    api_key = os.environ.pop(KEY_ENV, None) or None
    asyncio.run(serve(cls(config), sock, api_key))


def write_port_file(port_file: Path, port: int) -> None:
    """``port`` in ``port_file``, whole or absent for a reader polling it: written beside, in a
    new file of a random name (``O_EXCL``, never through a link or into a file someone else
    made: the port file may be in a shared directory such as /tmp, where another user could
    plant a link at a name known in advance), then renamed into place."""
    fd, staged = tempfile.mkstemp(prefix=f".{port_file.name}.", dir=port_file.parent)
    try:
        with os.fdopen(fd, "w") as out:
            os.fchmod(fd, 0o644)
            out.write(str(port))
        os.replace(staged, port_file)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staged)
        raise
