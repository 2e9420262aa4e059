"""A rollout's tools from its toolsets, wherever each is placed: a colocated toolset's methods
in-process; any other over MCP (streamable HTTP), from the server at its config's ``url`` or
from one launched for the rollout (``Toolset.run`` in a local child process, loopback only,
stopped when the rollout ends; a shared toolset's one server for the whole run,
``serve_shared``). Served tools are offered as ``<prefix>_<name>`` like
in-process ones, and the rollout's typed state travels with each call (``server.STATE_KEY``).
Without the MCP SDK (the ``mcp`` extra) a toolset placed in its own process runs in-process,
with a warning, as it did before this SDK served toolsets; a ``url`` needs the SDK.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import importlib.util
import inspect
import logging
import os
import secrets
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifiers.processes.die_with_parent import guarded
from verifiers.v1.errors import ToolsetError
from verifiers.v1.mcp.server import KEY_ENV, STATE_KEY, mcp_missing, state_payload
from verifiers.v1.state import State
from verifiers.v1.toolset import BoundTool, SharedToolsetConfig, Toolset
from verifiers.v1.types import Tool

if TYPE_CHECKING:
    from mcp import ClientSession

logger = logging.getLogger(__name__)

LAUNCH_TIMEOUT_S = 60.0
"""How long a launched toolset server may take to start listening."""

_LAUNCH = "import importlib, sys; getattr(importlib.import_module(sys.argv[1]), sys.argv[2]).run()"

_KEYS: dict[str, str] = {}
"""The key of each toolset server this process launched, by its URL: ``connect`` sends it."""


@dataclass
class MCPTool(BoundTool):
    """A tool of an MCP server, called over the rollout's session with it."""

    session: ClientSession
    remote_name: str

    async def call(self, arguments: dict[str, Any], state: State) -> Any:
        typed = type(state) is not State  # base State has nothing a tool could share
        meta = {STATE_KEY: state_payload(state)} if typed else None
        result = await self.session.call_tool(self.remote_name, arguments, meta=meta)
        back = (result.meta or {}).get(STATE_KEY)
        if typed and isinstance(back, dict):
            updated = type(state).model_validate({**back, "artifacts": state.artifacts})
            for name in type(state).model_fields:
                setattr(state, name, getattr(updated, name))
        blocks = [
            block if block.type in ("text", "image") else _as_text(block)
            for block in result.content
        ]
        if result.isError:
            detail = " ".join(getattr(b, "text", "") for b in blocks)
            return f"Error: {self.spec.name}: {detail}"
        return blocks


def _as_text(block: Any) -> Any:
    """An MCP content block the chat cannot carry (audio, a resource) as its JSON text."""
    from mcp.types import TextContent

    return TextContent(type="text", text=block.model_dump_json(exclude_none=True))


@asynccontextmanager
async def launched(toolset: Toolset[Any, Any]) -> AsyncIterator[str]:
    """``toolset`` served (``Toolset.run``) by a child process on a free loopback port for the
    context; its MCP URL. The child dies with this process, and is stopped on exit. It answers
    only requests with the key made for it here (``connect`` sends it): any local user reaches
    a loopback port, and a stranger's call would run its tools with a state of its choosing."""
    cls = type(toolset)
    if cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        raise ToolsetError(
            f"{cls.__name__} is not importable by module path ({cls.__module__}.{cls.__qualname__}),"
            " so it cannot be served in its own process: define it in a module, or set its "
            "config's colocated = true"
        )
    key = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory(prefix="vf-toolset-") as tmp:
        port_file, log = Path(tmp) / "port", Path(tmp) / "server.log"
        argv, extra = guarded([sys.executable, "-c", _LAUNCH, cls.__module__, cls.__qualname__])
        env = {
            **os.environ,
            **extra,
            "VF_CONFIG": toolset.config.model_dump_json(),
            "MCP_HOST": "127.0.0.1",
            "MCP_PORT": "0",
            "MCP_PORT_FILE": str(port_file),
            KEY_ENV: key,  # in its environment, which only this user reads; never in argv
        }
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                *argv, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out
            )
        url = ""
        try:
            port = await _listening(process, port_file, log, cls.__name__)
            url = f"http://127.0.0.1:{port}/mcp"
            _KEYS[url] = key
            yield url
        finally:
            _KEYS.pop(url, None)
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 5)
                except TimeoutError:
                    process.kill()
                    await process.wait()


def _read(path: Path) -> str:
    """A small file the launched server writes (its port, its log); empty until it exists."""
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


async def _listening(process: Any, port_file: Path, log: Path, name: str) -> int:
    """The port the launched server bound, once it accepts connections."""
    deadline = time.monotonic() + LAUNCH_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.returncode is not None:
            tail = _read(log)[-2000:]
            raise ToolsetError(
                f"toolset {name}'s MCP server exited ({process.returncode}) before serving: {tail}"
            )
        text = _read(port_file).strip()
        if text.isdigit():
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", int(text))
            except OSError:
                pass
            else:
                writer.close()
                return int(text)
        await asyncio.sleep(0.05)
    raise ToolsetError(f"toolset {name}'s MCP server did not listen within {LAUNCH_TIMEOUT_S}s")


async def connect(url: str, stack: AsyncExitStack) -> ClientSession:
    """An initialized MCP session with the server at ``url``, closed with ``stack``. The
    transport lives in a task of its own, which enters and leaves its cancel scopes itself: a
    rollout's tasks come and go, and a failed connection must not leak into them."""
    try:
        from mcp import ClientSession
        from mcp.client import streamable_http
    except ImportError as e:  # pragma: no cover - depends on the optional extra
        raise mcp_missing("a toolset served over MCP") from e
    # the transport's current name; mcp releases before 1.24 have only the older one
    transport = getattr(streamable_http, "streamable_http_client", None)
    transport = transport or streamable_http.streamablehttp_client
    ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
    done = asyncio.Event()

    headers = {"Authorization": f"Bearer {_KEYS[url]}"} if url in _KEYS else None

    async def hold() -> None:
        try:
            async with (
                _transport(transport, url, headers) as (read, write, _),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                ready.set_result(session)
                await done.wait()
        except BaseException as e:  # the transport's failure arrives as a group, or a cancel
            if not ready.done():
                ready.set_exception(
                    ToolsetError(f"cannot reach the MCP server at {url}: {_leaf(e)}")
                )
            if not isinstance(e, Exception):
                raise

    holder = asyncio.create_task(hold())

    async def close() -> None:
        done.set()
        with suppress(Exception):  # a server gone before the rollout ended: nothing to close
            await holder

    try:
        session = await ready
    except BaseException:
        await close()
        raise
    stack.push_async_callback(close)
    return session


@asynccontextmanager
async def _transport(
    transport: Any, url: str, headers: dict[str, str] | None
) -> AsyncIterator[Any]:
    """``transport`` to ``url``, sending ``headers``: the older transport takes them, the newer
    one an HTTP client that carries them (with the older one's timeouts)."""
    if headers is None:
        async with transport(url) as streams:
            yield streams
        return
    if "http_client" not in inspect.signature(transport).parameters:
        async with transport(url, headers=headers) as streams:
            yield streams
        return
    import httpx

    timeout = httpx.Timeout(30.0, read=300.0)
    async with (
        httpx.AsyncClient(headers=headers, timeout=timeout, follow_redirects=True) as client,
        transport(url, http_client=client) as streams,
    ):
        yield streams


def _leaf(error: BaseException) -> str:
    """The first real error inside an exception group, as ``Type: message``."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"


def mcp_installed() -> bool:
    """Whether the MCP SDK (the ``mcp`` extra) is importable here."""
    return importlib.util.find_spec("mcp") is not None


@functools.cache
def _warn_in_process(name: str) -> None:
    """Once per toolset class: without the MCP SDK, a toolset placed in its own process runs
    in-process instead (same tools, same state); serving it needs the extra."""
    from verifiers.installs.extras import install_hint

    logger.warning(
        "%s runs in-process: serving a toolset in its own process needs the MCP SDK "
        "(%s); set its config's colocated = true to silence this",
        name,
        install_hint("mcp", "mcp<2"),
    )


@asynccontextmanager
async def serve_shared(toolsets: list[Toolset[Any, Any]]) -> AsyncIterator[list[Toolset[Any, Any]]]:
    """The run's shared toolsets (``SharedToolsetConfig``) each served by one child process
    for the context, as upstream's ``serve_shared``: the toolsets, each served one given its
    server's ``url``, so every rollout connects to that one server (and its state still
    travels per call). Other toolsets, and shared ones with a ``url`` already, pass through;
    without the MCP SDK nothing is launched (their rollouts call them in-process)."""
    async with AsyncExitStack() as stack:
        served: list[Toolset[Any, Any]] = []
        for toolset in toolsets:
            config = toolset.config
            if not isinstance(config, SharedToolsetConfig) or config.url or not mcp_installed():
                served.append(toolset)
                continue
            if config.runtime.type != "subprocess":
                raise ToolsetError(
                    f"{type(toolset).__name__}: a shared toolset runtime {config.runtime.type!r} "
                    "is not in this SDK; place it in 'subprocess' (a local process) or give its url"
                )
            url = await stack.enter_async_context(launched(toolset))
            logger.info("shared tool server %s: %s", type(toolset).__name__, url)
            twin = copy.copy(toolset)
            twin.config = config.model_copy(update={"url": url})
            served.append(twin)
        yield served


async def open_tools(toolsets: list[Toolset[Any, Any]], stack: AsyncExitStack) -> list[BoundTool]:
    """The tools of ``toolsets`` for one rollout; servers and sessions close with ``stack``."""
    tools: list[BoundTool] = []
    for toolset in toolsets:
        config = toolset.config
        colocated = getattr(config, "colocated", False)  # a shared toolset is never colocated
        if config.url:
            url = config.url
        elif colocated or not mcp_installed():
            if not colocated:
                _warn_in_process(type(toolset).__name__)
            await toolset.setup()
            tools.extend(toolset.tools())
            continue
        elif config.runtime.type != "subprocess":
            raise ToolsetError(
                f"{type(toolset).__name__}: a toolset runtime {config.runtime.type!r} is not in "
                "this SDK; place it in 'subprocess' (a local process), colocate it, or give its url"
            )
        else:
            url = await stack.enter_async_context(launched(toolset))
        session = await connect(url, stack)
        listed = await session.list_tools()
        prefix = toolset.prefix
        for tool in listed.tools:
            spec = Tool(
                name=f"{prefix}_{tool.name}" if prefix else tool.name,
                description=tool.description or tool.name,
                parameters=tool.inputSchema,
            )
            tools.append(MCPTool(spec=spec, session=session, remote_name=tool.name))
    return tools
