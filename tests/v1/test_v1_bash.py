"""The v1 ``bash`` harness on the ``subprocess`` runtime, against the scripted endpoint: the
model's commands run in a confined sandbox made for its rollout (echo, a file written, edited
and read back, by the model and by a reward), a command past its timeout, commands that try
to read or write the host, a sandbox that crashes or a rollout that is cancelled (an error on
that rollout, no sandbox left behind), and the bash harness picked by an env config in vf-eval.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.sandboxes import named, sandbox_pids, wait_until_no_sandboxes

import verifiers.v1 as vf
from verifiers.cli.eval import main
from verifiers.results import read_rows
from verifiers.testing import ModelServer, Reply
from verifiers.v1.errors import SandboxError
from verifiers.v1.runtimes import Runtime


class FileData(vf.TaskData):
    answer: str


class FileTask(vf.Task[FileData]):
    @vf.reward
    async def wrote_answer(self, runtime: Runtime) -> float:
        try:
            return float((await runtime.read("answer.txt")).decode().strip() == self.data.answer)
        except SandboxError:
            return 0.0


def task(answer: str = "goodbye world") -> FileTask:
    return FileTask(FileData(idx=0, prompt="Write the answer to answer.txt.", answer=answer))


def script(*commands: str | tuple[str, dict]):
    """A model that makes one tool call per turn (``bash`` unless named), then stops."""

    def policy(request: dict) -> Reply | str:
        done = sum(1 for m in request["messages"] if m["role"] == "tool")
        if done == len(commands):
            return "done"
        step = commands[done]
        name, args = ("bash", {"command": step}) if isinstance(step, str) else step
        return Reply(tool_calls=[Reply.tool_call(name, args)])

    return policy


def bash_agent(server: ModelServer, **harness) -> vf.Agent:
    config = vf.AgentConfig.model_validate({"harness": {"id": "bash", **harness}})
    context = vf.ModelContext(base_url=server.base_url, model="test-model", api_key="k")
    return vf.Agent("agent", config, context)


def tool_outputs(trace: vf.Trace) -> list[str]:
    return [str(m.content) for m in trace.tool_messages]


async def test_the_model_runs_commands_and_edits_a_file_that_a_reward_reads_back(server):
    server.set_handler(
        script(
            "echo hello from $(pwd)",
            "printf 'hello world\\n' > answer.txt && cat answer.txt",
            ("edit", {"path": "answer.txt", "old_str": "hello", "new_str": "goodbye"}),
            "cat answer.txt; echo oops >&2; exit 3",
        )
    )
    trace = await bash_agent(server).run(task())
    assert trace.ok and trace.errors == [], trace.errors
    echo, wrote, edited, read = tool_outputs(trace)
    assert echo.startswith("hello from /")
    assert wrote == "hello world\n"
    assert edited == "Edited answer.txt"
    assert read == "goodbye world\noops\n\n[exit code 3]"
    assert trace.rewards["wrote_answer"] == vf.Reward(score=1.0)  # read from the same box
    first = server.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["bash", "edit"]
    assert "You are a coding agent" in first["messages"][0]["content"]
    assert trace.agent is not None and trace.agent.runtime is not None
    assert trace.agent.runtime.type == "subprocess"
    assert trace.info["runtime_isolation"] in ("bwrap", "landlock")
    assert wait_until_no_sandboxes() == []  # torn down when the rollout ended


async def test_edit_can_be_turned_off_and_each_rollout_gets_a_fresh_sandbox(server):
    server.set_handler(script("ls; printf x > answer.txt"))
    agent = bash_agent(server, edit=False)
    first, second = await agent.run(task("x")), await agent.run(task("x"))
    assert tool_outputs(first) == tool_outputs(second) == [""]  # nothing left by the first
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["bash"]
    assert first.agent.runtime.id != second.agent.runtime.id


async def test_a_command_past_its_timeout_is_killed_and_the_rollout_goes_on(server):
    server.set_handler(script("sleep 30; echo late", "echo still here"))
    started = time.monotonic()
    trace = await bash_agent(server, tool_timeout=1).run(task())
    assert time.monotonic() - started < 15
    timed_out, after = tool_outputs(trace)
    assert "late" not in timed_out and "[timed out after 1 s" in timed_out
    assert after == "still here\n"
    assert trace.errors == [] and trace.stop_condition == "agent_completed"


async def test_long_output_is_cut_to_the_cap_keeping_head_and_tail(server):
    server.set_handler(script("echo START; head -c 50000 /dev/zero | tr '\\0' a; echo; echo END"))
    (output,) = tool_outputs(await bash_agent(server, max_output_chars=1000).run(task()))
    assert output.startswith("START") and output.rstrip().endswith("END")
    assert "characters cut" in output and len(output) < 1100


async def test_commands_cannot_read_or_write_the_host(server, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret 4242")
    outside = tmp_path / "written-from-the-sandbox"
    server.set_handler(
        script(
            f"cat {secret}",
            f"echo escaped > {outside}",
            "cat /etc/shadow; ls /home",
            ("edit", {"path": "../../../etc/hostname", "old_str": "a", "new_str": "b"}),
        )
    )
    trace = await bash_agent(server).run(task())
    read, write, system, edit = tool_outputs(trace)
    assert "4242" not in read and "No such file" in read
    assert not outside.exists() and "[exit code" in write
    assert "[exit code" in system
    assert edit.startswith("error: could not read")
    assert trace.errors == []


async def test_a_crashed_sandbox_is_an_error_on_that_rollout_only(server):
    # the command stops its sandbox's worker (SIGINT: a worker forked from the zygote is its
    # namespace's pid 1, which a SIGKILL from inside cannot stop)
    server.set_handler(script("kill -INT $PPID"))
    agent = bash_agent(server)
    crashed = await agent.run(task())
    assert not crashed.ok and crashed.stop_condition == "error"
    assert crashed.errors[0].type == "SandboxError" and "crashed" in crashed.errors[0].message
    server.set_handler(script("printf 'goodbye world' > answer.txt"))
    fine = await agent.run(task())
    assert fine.ok and fine.reward == 1.0
    assert wait_until_no_sandboxes() == []


async def test_a_cancelled_rollout_leaves_no_sandbox(server):
    asked = threading.Event()
    sleep = script("sleep 60")

    def policy(request: dict) -> Reply | str:
        asked.set()
        return sleep(request)

    server.set_handler(policy)
    rollout = asyncio.ensure_future(bash_agent(server).run(task()))
    assert await asyncio.to_thread(asked.wait, 30)  # the model was asked, the sleep follows
    deadline = time.monotonic() + 60
    while not named(sandbox_pids(), "sleep"):  # the rollout's sandbox is running the sleep
        assert time.monotonic() < deadline and not rollout.done(), sandbox_pids()
        await asyncio.sleep(0.05)
    rollout.cancel()
    with pytest.raises(asyncio.CancelledError):
        await rollout
    assert wait_until_no_sandboxes() == []


def test_runtimes_and_harnesses_this_sdk_lacks_are_refused_by_what_they_need(server):
    context = vf.ModelContext(base_url=server.base_url, model="m")
    docker = vf.AgentConfig.model_validate(
        {"harness": {"id": "bash"}, "runtime": {"type": "docker"}}
    )
    with pytest.raises(vf.HarnessError, match="'docker' needs a container engine"):
        vf.Agent("agent", docker, context)
    codex = vf.AgentConfig.model_validate({"harness": {"id": "codex"}})
    with pytest.raises(vf.HarnessError, match="third-party agent CLI"):
        vf.Agent("agent", codex, context)
    search = vf.AgentConfig.model_validate({"harness": {"id": "bash", "search": True}})
    with pytest.raises(vf.HarnessError, match="network"):
        vf.Agent("agent", search, context)


FILES = """
import verifiers.v1 as vf
from verifiers.v1.errors import SandboxError


class FileData(vf.TaskData):
    answer: str


class FileTask(vf.Task[FileData]):
    @vf.reward
    async def wrote_answer(self, runtime) -> float:
        try:
            return float((await runtime.read("answer.txt")).decode().strip() == self.data.answer)
        except SandboxError:
            return 0.0


class FilesTaskset(vf.Taskset[FileTask, vf.TasksetConfig]):
    def load(self):
        for i, word in enumerate(["alpha", "beta"]):
            yield FileTask(FileData(idx=i, prompt=f"Write {word} to answer.txt.", answer=word), self.config.task)


__all__ = ["FilesTaskset"]
"""


def test_vf_eval_runs_a_taskset_on_the_bash_harness_an_env_config_names(
    server, tmp_path, monkeypatch
):
    root = tmp_path / "pkgs" / "files_v1"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text(FILES)
    monkeypatch.syspath_prepend(str(root.parent))
    monkeypatch.setenv("PYTHONPATH", f"{root.parent}:{os.environ.get('PYTHONPATH', '')}")

    def policy(request: dict) -> Reply | str:
        messages = request["messages"]
        if any(m["role"] == "tool" for m in messages):
            return "done"
        word = messages[1]["content"].split()[1]
        return Reply(tool_calls=[Reply.tool_call("bash", {"command": f"echo {word} > answer.txt"})])

    server.set_handler(policy)
    env_args = json.dumps({"env": {"agent": {"harness": {"id": "bash", "tool_timeout": 5}}}})
    out = tmp_path / "out"
    argv = ["files-v1", "-b", server.base_url, "-m", "test-model", "-n", "2", "-r", "1"]
    assert main([*argv, "-a", env_args, "--output-dir", str(out)]) == 0
    (run,) = list((out / "evals").glob("*/*"))
    rows = list(read_rows(run / "results.jsonl"))
    assert sorted(r["reward"] for r in rows) == [1.0, 1.0]
    assert all(r["completion"][0]["role"] == "assistant" for r in rows)
    episodes = [
        vf.WireEpisode.model_validate_json(line)
        for line in Path(run / "traces.jsonl").read_text().splitlines()
    ]
    assert all(e.traces[0].agent.config.harness.id == "bash" for e in episodes)
    assert all(e.traces[0].agent.runtime.type == "subprocess" for e in episodes)


UPSTREAM_GIT = Path(
    os.environ.get("VF_UPSTREAM_GIT", "/work/.mirror/PrimeIntellect-ai+verifiers/repo")
)


@pytest.fixture
def upstream_fixtures(tmp_path, monkeypatch) -> Path:
    """Upstream v0.3.0's e2e fixture tasksets (tests/v1/fixtures), from a git copy of it."""
    if not (UPSTREAM_GIT / "HEAD").is_file():
        pytest.skip("needs a git copy of PrimeIntellect-ai/verifiers (VF_UPSTREAM_GIT)")
    root = tmp_path / "fixtures"
    root.mkdir()
    for name in ("echo_v1", "echo_agentic_v1"):
        source = subprocess.run(
            ["git", "-C", str(UPSTREAM_GIT), "show", f"v0.3.0:tests/v1/fixtures/{name}.py"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (root / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", f"{root}:{os.environ.get('PYTHONPATH', '')}")  # workers
    yield root
    for name in ("echo_v1", "echo_agentic_v1"):
        sys.modules.pop(name, None)


def eval_rows(server, out: Path, env_id: str, harness: str) -> list[dict]:
    env_args = json.dumps({"env": {"agent": {"harness": {"id": harness}}}})
    argv = [env_id, "-b", server.base_url, "-m", "test-model", "-n", "1", "-r", "1"]
    assert main([*argv, "-a", env_args, "--output-dir", str(out)]) == 0
    (run,) = list((out / "evals").glob("*/*"))
    return list(read_rows(run / "results.jsonl"))


def test_upstreams_e2e_echo_taskset_scores_one_on_the_null_harness(
    server, tmp_path, upstream_fixtures
):
    def policy(request: dict) -> str:
        assert "tools" not in request  # the null harness offers no tool of its own
        return "Sure: " + request["messages"][-1]["content"].rsplit(": ", 1)[1]

    server.set_handler(policy)
    (row,) = eval_rows(server, tmp_path / "out", "echo-v1", "null")
    assert row["reward"] == 1.0 and row["error"] is None


def test_upstreams_e2e_agentic_taskset_scores_one_on_the_bash_harness(
    server, tmp_path, upstream_fixtures
):
    def policy(request: dict) -> Reply | str:
        messages = request["messages"]
        if any(m["role"] == "tool" for m in messages):
            return "Done."
        phrase = messages[-1]["content"].split("'")[1]
        command = f"printf %s {shlex.quote(phrase)} > answer.txt"
        return Reply(tool_calls=[Reply.tool_call("bash", {"command": command})])

    server.set_handler(policy)
    (row,) = eval_rows(server, tmp_path / "out", "echo-agentic-v1", "bash")
    assert row["reward"] == 1.0 and row["error"] is None  # read back from the sandbox
