"""v1 toolsets wherever their config places them, against the scripted endpoint: served over
MCP by a child process launched for the rollout (the default), by an MCP server already running
at ``url``, or colocated in-process. The tools report their process id, so each test sees where
its tool really ran; a typed state written by a served tool must reach the trace."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import verifiers.v1 as vf
from verifiers.testing import Reply
from verifiers.v1.agent import Agent, ModelContext
from verifiers.v1.configs.harness import NullHarnessConfig
from verifiers.v1.mcp import client as mcp_client
from verifiers.v1.types import ImageUrlContentPart, content_text

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

TOOLS = f'''
import os

from mcp.types import ImageContent, TextContent

import verifiers.v1 as vf


class TallyState(vf.State):
    tally: int = 0


class TallyToolset(vf.Toolset[vf.ToolsetConfig, TallyState]):
    TOOL_PREFIX = "tally"

    @vf.tool
    def add(self, n: int) -> str:
        """Add n to the rollout's tally."""
        self.state.tally += n
        return f"tally={{self.state.tally}} pid={{os.getpid()}}"

    @vf.tool
    def picture(self) -> list:
        """A one-pixel picture."""
        return [
            TextContent(type="text", text="a picture"),
            ImageContent(type="image", data="{PNG}", mimeType="image/png"),
        ]
'''


@pytest.fixture
def tally(tmp_path, monkeypatch) -> Iterator[type]:
    """``tally_tools`` importable here and in the processes the tests start."""
    (tmp_path / "tally_tools.py").write_text(TOOLS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    import tally_tools

    yield tally_tools
    sys.modules.pop("tally_tools", None)


def task_with(toolset: vf.Toolset, prompt: str) -> vf.Task:
    class ToolTask(vf.Task[vf.TaskData, type(toolset.state), vf.TaskConfig]):  # type: ignore[misc]
        @classmethod
        def toolsets(cls, config: vf.TaskConfig) -> list[vf.Toolset]:
            return [toolset]

    return ToolTask(vf.TaskData(idx=0, prompt=prompt))


async def run(server, task: vf.Task) -> vf.Trace:
    agent = Agent(
        "agent",
        vf.AgentConfig(harness=NullHarnessConfig(id="null"), max_turns=6),
        ModelContext(base_url=server.base_url, model="test-model"),
    )
    return await agent.run(task)


def adds_then_answers(request: dict) -> Reply | str:
    """tally_add 2, then 3, then the last result as the answer."""
    results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
    if len(results) < 2:
        n = 2 if not results else 3
        return Reply(tool_calls=[Reply.tool_call("tally_add", {"n": n})])
    return f"final: {results[-1]}"


def pid_of(text: str) -> int:
    return int(text.rsplit("pid=", 1)[1])


async def test_a_toolset_is_served_over_mcp_from_its_own_process_and_its_state_reaches_the_trace(
    server, tally
):
    server.set_handler(adds_then_answers)
    trace = await run(server, task_with(tally.TallyToolset(), "Tally 2 then 3."))
    assert trace.ok, trace.errors
    results = [content_text(m.content) for m in trace.tool_messages]
    assert [r.split()[0] for r in results] == ["tally=2", "tally=5"]
    assert trace.state.tally == 5  # written by the served tool, sent back in the result's _meta
    served = {pid_of(r) for r in results}
    assert len(served) == 1 and os.getpid() not in served  # one server for the rollout
    (pid,) = served
    for _ in range(50):  # ...stopped when the rollout ended
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("the toolset's server outlived its rollout")
    assert [t.name for t in trace.tools] == ["tally_add", "tally_picture"]
    assert trace.tools[0].parameters["properties"]["n"]["type"] == "integer"


async def test_a_colocated_toolset_runs_in_process(server, tally):
    server.set_handler(adds_then_answers)
    toolset = tally.TallyToolset(vf.ToolsetConfig(colocated=True))
    trace = await run(server, task_with(toolset, "Tally 2 then 3."))
    assert trace.ok and trace.state.tally == 5
    assert {pid_of(content_text(m.content)) for m in trace.tool_messages} == {os.getpid()}


async def test_without_the_mcp_sdk_a_served_toolset_runs_in_process_and_says_so(
    server, tally, monkeypatch, caplog
):
    """The ``mcp`` extra is optional: a toolset placed in its own process still runs, here."""
    monkeypatch.setattr(mcp_client, "mcp_installed", lambda: False)  # as if the extra were absent
    mcp_client._warn_in_process.cache_clear()
    server.set_handler(adds_then_answers)
    trace = await run(server, task_with(tally.TallyToolset(), "Tally 2 then 3."))
    assert trace.ok and trace.state.tally == 5
    assert {pid_of(content_text(m.content)) for m in trace.tool_messages} == {os.getpid()}
    assert "TallyToolset runs in-process" in caplog.text
    assert "(pip install 'mcp" in caplog.text and "verifiers[" not in caplog.text


@pytest.fixture
def running_server(tally, tmp_path) -> Iterator[str]:
    """``TallyToolset.run()`` as a standalone MCP server; its URL."""
    port_file = tmp_path / "port"
    env = {**os.environ, "MCP_PORT_FILE": str(port_file)}
    code = "from tally_tools import TallyToolset; TallyToolset.run()"
    process = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        for _ in range(600):
            if port_file.exists() and port_file.read_text().isdigit():
                break
            assert process.poll() is None, "the toolset server exited"
            subprocess.run(["sleep", "0.05"], check=True)
        yield f"http://127.0.0.1:{port_file.read_text()}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def test_a_toolset_server_accepts_connections_once_its_port_file_names_the_port(tally, tmp_path):
    """Whoever reads ``MCP_PORT_FILE`` connects at once: the port is written only once it
    listens (frozen at that moment, a connection still completes), and never half-written."""
    port_file = tmp_path / "port"
    env = {**os.environ, "MCP_PORT_FILE": str(port_file)}
    code = "from tally_tools import TallyToolset; TallyToolset.run()"
    process = subprocess.Popen([sys.executable, "-c", code], env=env)
    try:
        while not port_file.exists():  # no sleep: catch the first moment the name appears
            assert process.poll() is None, "the toolset server exited"
        process.send_signal(signal.SIGSTOP)
        text = port_file.read_text()
        assert text.isdigit(), repr(text)
        with socket.create_connection(("127.0.0.1", int(text)), timeout=5):
            pass
    finally:
        process.send_signal(signal.SIGCONT)
        process.terminate()
        process.wait(10)


def test_a_port_file_in_a_shared_dir_is_never_written_through_a_planted_link(tally, tmp_path):
    """``MCP_PORT_FILE`` in a shared sticky directory (/tmp): the port was staged at
    ``PORT_FILE.PID.tmp``, a name known in advance, written through whatever was there, then
    renamed into place; another local user (uid 65534) planted a link there, and the user's
    file it named was overwritten with the port (and the port file left a link to it). Now it is
    staged in a new file of a random name; the port file is the user's own and names the port."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("another local user (uid 65534) needs root and setpriv")
    shared = Path(tempfile.mkdtemp(prefix="vf-shared-"))
    shared.chmod(0o1777)  # as /tmp
    victim = tmp_path / "victim"
    victim.write_text("kept")
    port_file = shared / "toolset.port"
    env = {**os.environ, "MCP_PORT_FILE": str(port_file)}
    code = "import sys; sys.stdin.readline(); import tally_tools; tally_tools.TallyToolset.run()"
    process = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE)
    try:
        planted = shared / f"toolset.port.{process.pid}.tmp"
        subprocess.run([*NOBODY, "ln", "-s", str(victim), str(planted)], check=True)
        assert process.stdin is not None
        process.stdin.write(b"go\n")
        process.stdin.flush()
        while not (port_file.exists() and port_file.read_text().isdigit()):
            assert process.poll() is None, "the toolset server exited"
            subprocess.run(["sleep", "0.05"], check=True)
        assert victim.read_text() == "kept"
        info = port_file.lstat()
        assert stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()
        with socket.create_connection(("127.0.0.1", int(port_file.read_text())), timeout=5):
            pass
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(shared, ignore_errors=True)


async def test_a_toolset_url_reaches_a_running_mcp_server_and_keeps_image_content(
    server, tally, running_server
):
    def picture_then_done(request: dict) -> Reply | str:
        if any(m["role"] == "tool" for m in request["messages"]):
            return "done"
        return Reply(tool_calls=[Reply.tool_call("tally_picture", {})])

    server.set_handler(picture_then_done)
    toolset = tally.TallyToolset(vf.ToolsetConfig(url=running_server))
    trace = await run(server, task_with(toolset, "Show the picture."))
    assert trace.ok, trace.errors
    (message,) = trace.tool_messages
    assert isinstance(message.content, list)
    assert content_text(message.content) == "a picture"
    (image,) = [p for p in message.content if isinstance(p, ImageUrlContentPart)]
    assert image.image_url.url == f"data:image/png;base64,{PNG}"
    # the model was sent the image as a content part of the tool message
    sent = server.requests[-1]["messages"][-1]
    assert sent["role"] == "tool" and json.dumps(sent).count(PNG) == 1


async def test_bad_arguments_to_a_served_tool_come_back_as_the_tool_message(server, tally):
    def bad_then_done(request: dict) -> Reply | str:
        if any(m["role"] == "tool" for m in request["messages"]):
            return "done"
        return Reply(tool_calls=[Reply.tool_call("tally_add", {"n": "many"})])

    server.set_handler(bad_then_done)
    trace = await run(server, task_with(tally.TallyToolset(), "Add many."))
    assert trace.ok and trace.state.tally == 0
    (message,) = trace.tool_messages
    text = content_text(message.content)
    assert text.startswith("Error: tally_add:") and "n" in text


async def test_a_toolset_that_cannot_be_served_fails_its_rollout_saying_why(server, tally):
    server.set_handler(adds_then_answers)

    class Local(vf.Toolset[vf.ToolsetConfig]):
        @vf.tool
        def ping(self) -> str:
            """Ping."""
            return "pong"

    unreachable = tally.TallyToolset(vf.ToolsetConfig(url="http://127.0.0.1:9/mcp"))
    docker = tally.TallyToolset(vf.ToolsetConfig(runtime={"type": "docker"}))
    for toolset, says in [
        (Local(), "colocated = true"),
        (unreachable, "cannot reach the MCP server at http://127.0.0.1:9/mcp"),
        (docker, "toolset runtime 'docker' is not in this SDK"),
    ]:
        trace = await run(server, task_with(toolset, "Tally."))
        assert not trace.ok
        assert says in trace.errors[0].message
        assert trace.num_turns == 0  # no model call was made


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]  # another local user

STRANGER = r"""
import json, os, sys, urllib.error, urllib.request

url, pid = sys.argv[1], sys.argv[2]
call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "add", "arguments": {"n": 100}, "_meta": {"vf_state": {"tally": 7}}}}
statuses = []
for body in ({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                 "protocolVersion": "2025-03-26", "capabilities": {},
                 "clientInfo": {"name": "stranger", "version": "0"}}}, call):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            statuses.append(reply.status)
    except urllib.error.HTTPError as exc:
        statuses.append(exc.code)
with open(f"/proc/{pid}/cmdline", "rb") as f:
    argv = f.read().decode(errors="replace")
try:
    open(f"/proc/{pid}/environ", "rb").read()
    environ = "read"
except PermissionError:
    environ = "refused"
print(json.dumps({"statuses": statuses, "argv": argv, "environ": environ}))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="runs a second local user (uid 65534): needs root")
async def test_another_local_user_cannot_call_a_launched_toolsets_tools_and_the_rollout_can(
    server, tally
):
    """A toolset server the SDK launched answered any local process at its loopback port: a
    stranger could run its tools with a state of its choosing. It now answers only requests
    with a key made for it, handed over in its environment (never its argv): the stranger's
    MCP requests are 401s and it finds the key in no argv; the rollout's calls go through."""
    import psutil

    async with mcp_client.launched(tally.TallyToolset()) as url:
        (child,) = [
            p
            for p in psutil.Process().children(recursive=True)
            if "tally_tools" in " ".join(p.cmdline())
        ]
        stranger = await asyncio.to_thread(
            subprocess.run,
            [*NOBODY, sys.executable, "-I", "-c", STRANGER, url, str(child.pid)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert stranger.returncode == 0, stranger.stderr
        seen = json.loads(stranger.stdout)
        assert seen["statuses"] == [401, 401]
        assert "tally_tools" in seen["argv"] and mcp_client._KEYS[url] not in seen["argv"]
        assert seen["environ"] == "refused"
    server.set_handler(adds_then_answers)
    trace = await run(server, task_with(tally.TallyToolset(), "Tally 2 then 3."))
    assert trace.ok, trace.errors
    assert trace.state.tally == 5  # the rollout's own calls, with the key
