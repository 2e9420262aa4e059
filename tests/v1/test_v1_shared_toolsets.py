"""A taskset's shared toolset (``SharedToolsetConfig``, upstream's taskset-scoped tool server):
one real MCP server process serves every rollout of a run, its ``setup`` runs once, and
concurrent rollouts writing ``self.state`` through it never see each other's writes (the
state travels with each call). Driven through ``run_eval`` and through ``vf-eval`` (in process
and in env workers: one server per worker, gone with the run or with a killed worker) against
the scripted endpoint."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import verifiers.v1 as vf
from verifiers.cli.eval import main
from verifiers.results import read_rows
from verifiers.testing import STALLED_S, Reply
from verifiers.v1.cli.eval.runner import run_eval, run_eval_server
from verifiers.v1.configs.cli.eval import EvalConfig
from verifiers.v1.configs.serve import StaticPoolConfig
from verifiers.v1.errors import ToolsetError
from verifiers.v1.utils.loaders import load_environment

pytest.importorskip("mcp")

PAD = '''
import asyncio
import os

import verifiers.v1 as vf

WORDS = ["alpha", "bravo", "charlie", "delta"]


class PadState(vf.State):
    slot: str = ""


class PadConfig(vf.SharedToolsetConfig):
    setups_file: str = ""


class PadToolset(vf.Toolset[PadConfig, PadState]):
    TOOL_PREFIX = "pad"

    async def setup(self) -> None:
        with open(self.config.setups_file, "a") as f:
            f.write(f"{os.getpid()}\\n")

    @vf.tool
    async def roundtrip(self, word: str) -> str:
        """Store word, wait for the other rollouts to store theirs, read it back."""
        self.state.slot = word
        await asyncio.sleep(0.3)
        return f"{self.state.slot} pid={os.getpid()}"


class PadTask(vf.Task[vf.TaskData, PadState]):
    @vf.reward
    async def own_word(self, trace) -> float:
        return float(trace.state.slot == WORDS[self.data.idx])


class PadTasksetConfig(vf.TasksetConfig):
    tools: PadConfig = PadConfig()


class PadTaskset(vf.Taskset[PadTask, PadTasksetConfig]):
    @classmethod
    def toolsets(cls, config):
        return [PadToolset(config.tools)]

    def load(self):
        return [
            PadTask(vf.TaskData(idx=i, prompt=f"roundtrip {w}"), self.config.task)
            for i, w in enumerate(WORDS)
        ]


__all__ = ["PadTaskset"]
'''


@pytest.fixture
def shared_pad(tmp_path, monkeypatch) -> Iterator[ModuleType]:
    """The ``shared_pad`` taskset package, importable here and by the server it launches."""
    (tmp_path / "shared_pad.py").write_text(PAD)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    import shared_pad

    yield shared_pad
    sys.modules.pop("shared_pad", None)


def roundtrips_its_word(request: dict) -> Reply | str:
    """Calls ``pad_roundtrip`` with the word of its prompt, then answers with the result."""
    results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
    if not results:
        word = request["messages"][-1]["content"].split()[-1]
        return Reply(tool_calls=[Reply.tool_call("pad_roundtrip", {"word": word})])
    return f"got {results[-1]}"


def pad_config(base_url: str, setups: Path, out: Path, tools: dict | None = None) -> EvalConfig:
    return EvalConfig.model_validate(
        {
            "env": {
                "taskset": {
                    "id": "shared-pad",
                    "tools": {"setups_file": str(setups), **(tools or {})},
                },
                "agent": {"max_turns": 4, "harness": {"id": "null"}},
            },
            "model": "test-model",
            "client": {"base_url": base_url},
            "max_concurrent": 4,
            "output_dir": str(out),
            "rich": False,
        }
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_one_shared_server_serves_every_rollout_and_keeps_each_rollouts_state_its_own(
    server, shared_pad, tmp_path
):
    server.set_handler(roundtrips_its_word)
    setups = tmp_path / "setups"
    config = pad_config(server.base_url, setups, tmp_path / "out")
    episodes = await run_eval(load_environment(config.env), config)
    traces = [t for e in episodes for t in e.traces]
    assert len(traces) == 4 and all(t.ok for t in traces), [t.errors for t in traces]
    # each rollout read back its own word although all four wrote one server concurrently
    assert [t.reward for t in traces] == [1.0] * 4
    assert sorted(t.state.slot for t in traces) == sorted(shared_pad.WORDS)
    results = [t.tool_messages[0].content for t in traces]
    assert sorted(r.split()[0] for r in results) == sorted(shared_pad.WORDS)
    pids = {int(r.rsplit("pid=", 1)[1]) for r in results}
    assert len(pids) == 1 and os.getpid() not in pids  # one server process, not this one
    assert setups.read_text().split() == [str(p) for p in pids]  # its setup ran once
    (pid,) = pids
    for _ in range(50):  # ...and it ended with the run
        if not alive(pid):
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("the shared tool server outlived the run")
    lines = (tmp_path / "out" / "traces.jsonl").read_text().splitlines()
    assert len(lines) == 4 and all(json.loads(line)["traces"] for line in lines)


async def test_a_shared_toolset_at_a_url_is_used_as_is_and_nothing_is_launched(
    server, shared_pad, tmp_path
):
    setups = tmp_path / "setups"
    config = pad_config(
        server.base_url, setups, tmp_path / "out", {"url": "http://127.0.0.1:9/mcp"}
    )
    episodes = await run_eval(load_environment(config.env), config)
    traces = [t for e in episodes for t in e.traces]
    assert not setups.exists()  # no server of ours was started
    assert all(not t.ok for t in traces)
    assert all(
        "cannot reach the MCP server at http://127.0.0.1:9/mcp" in t.errors[0].message
        for t in traces
    )


async def test_a_shared_toolset_in_a_runtime_this_sdk_lacks_fails_the_run_naming_it(
    server, shared_pad, tmp_path
):
    config = pad_config(
        server.base_url, tmp_path / "setups", tmp_path / "out", {"runtime": {"type": "docker"}}
    )
    with pytest.raises(ToolsetError, match="shared toolset runtime 'docker' is not in this SDK"):
        await run_eval(load_environment(config.env), config)


def eval_argv(
    base_url: str, setups: Path, out: Path, *more: str, tools: dict | None = None
) -> list[str]:
    """``vf-eval shared-pad``: its 4 tasks twice each, all 8 rollouts at once."""
    tools = {"setups_file": str(setups), **(tools or {})}
    env = {"env": {"taskset": {"tools": tools}, "agent": {"max_turns": 4}}}
    argv = ["shared-pad", "-b", base_url, "-m", "test-model", "-n", "4", "-r", "2", "-c", "8"]
    return [*argv, "-a", json.dumps(env), "--output-dir", str(out), *more]


def served_by(out: Path) -> list[int]:
    """The pid of the tool server each rollout of the run's ``traces.jsonl`` talked to."""
    (run,) = list((out / "evals").glob("*/*"))
    episodes = [vf.WireEpisode.model_validate_json(line) for line in open(run / "traces.jsonl")]
    assert len(episodes) == 8 and all(e.ok for e in episodes)
    rows = list(read_rows(run / "results.jsonl"))
    # every rollout read back its own word: the server kept each rollout's state apart
    assert [r["reward"] for r in rows] == [1.0] * 8 and all(r["error"] is None for r in rows)
    return [int(e.traces[0].tool_messages[0].content.rsplit("pid=", 1)[1]) for e in episodes]


def wait_gone(pids: set[int], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        assert time.monotonic() < deadline, f"tool server(s) {pids} outlived their owner"
        time.sleep(0.05)


def test_vf_eval_in_process_starts_a_shared_toolset_once_for_the_whole_run(
    server, shared_pad, tmp_path
):
    server.set_handler(roundtrips_its_word)
    setups, out = tmp_path / "setups", tmp_path / "out"
    assert main(eval_argv(server.base_url, setups, out, "--no-env-workers")) == 0
    started = [int(p) for p in setups.read_text().split()]
    assert len(started) == 1 and started[0] != os.getpid()  # one server for 8 rollouts
    assert set(served_by(out)) == set(started)
    wait_gone(set(started))  # ...stopped when the run ended


def test_vf_eval_fails_each_rollout_naming_a_shared_toolset_it_cannot_serve(
    server, shared_pad, tmp_path, capsys
):
    """A shared toolset in a runtime this SDK lacks: every row is an error saying so (its
    trace too), no model call is made, and the run ends saying every rollout failed (exit 1)."""
    out = tmp_path / "out"
    docker = {"runtime": {"type": "docker"}}
    argv = eval_argv(server.base_url, tmp_path / "setups", out, "--no-env-workers", tools=docker)
    assert main(argv) == 1
    said = "shared toolset runtime 'docker' is not in this SDK"
    first = f"the first: RolloutError: ToolsetError: PadToolset: a {said}"
    assert f"every rollout failed (8); {first}" in capsys.readouterr().err
    (run,) = list((out / "evals").glob("*/*"))
    rows = list(read_rows(run / "results.jsonl"))
    assert len(rows) == 8 and all(said in str(r["error"]) for r in rows), rows[0]["error"]
    lines = (run / "traces.jsonl").read_text().splitlines()
    episodes = [vf.WireEpisode.model_validate_json(line) for line in lines]
    assert all(not e.ok and said in e.errors[0].message for e in episodes)
    assert not server.requests and not (tmp_path / "setups").exists()


def test_vf_eval_env_workers_start_a_shared_toolset_once_per_worker(server, shared_pad, tmp_path):
    server.set_handler(roundtrips_its_word)
    setups, out = tmp_path / "setups", tmp_path / "out"
    assert main(eval_argv(server.base_url, setups, out, "--env-workers=2")) == 0
    started = [int(p) for p in setups.read_text().split()]
    # at most one per worker (a worker that got no rollout starts none), never one per rollout
    assert 1 <= len(started) <= 2 and len(set(started)) == len(started)
    assert set(served_by(out)) == set(started)
    wait_gone(set(started))  # each worker stopped its own when the run closed the pool


@pytest.mark.slow
def test_a_killed_env_worker_takes_its_shared_tool_server_with_it(server, shared_pad, tmp_path):
    """SIGKILL of the worker holding the server mid-run: the server dies with it (no orphan),
    the pool reruns the groups in new workers, each of which starts its own, and the run
    completes with every server gone. The model holds each answer after a tool result until
    the worker is killed: its groups cannot have finished first, however late the test looks."""
    killed = threading.Event()

    def holds_until_killed(request: dict) -> Reply | str:
        reply = roundtrips_its_word(request)
        if isinstance(reply, str) and not killed.is_set():  # the dead worker's: never answered
            return Reply(content=reply, delay=STALLED_S)
        return reply

    server.set_handler(holds_until_killed)
    setups, out = tmp_path / "setups", tmp_path / "out"
    argv = [sys.executable, "-m", "verifiers.cli.eval"]
    argv += eval_argv(server.base_url, setups, out, "--env-workers=1")
    run = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not setups.exists() or not setups.read_text().strip():
            assert run.poll() is None, run.stderr.read().decode() if run.stderr else ""
            assert time.monotonic() < deadline, "no tool server started"
            time.sleep(0.05)
        first = int(setups.read_text().split()[0])
        worker = int(open(f"/proc/{first}/stat").read().rsplit(")", 1)[1].split()[1])
        assert worker not in (run.pid, os.getpid())  # the server is the worker's child
        os.kill(worker, signal.SIGKILL)
        killed.set()
        wait_gone({first})
        _, err = run.communicate(timeout=240)
        assert run.returncode == 0, err.decode()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    started = [int(p) for p in setups.read_text().split()]
    # the new worker's own server, and one in each worker the pool forked to rerun the dead
    # one's groups alone (workers too: each serves its rollouts from a server of its own)
    assert started[0] == first and len(started) >= 2, started
    wait_gone(set(started))


async def test_run_eval_server_serves_a_shared_toolset_once_per_worker_on_the_tasks_run_eval_picks(
    server, shared_pad, tmp_path
):
    """Through a one-worker ``vf-env-server``: one tool server for every rollout, each rollout
    still reading back its own state, and the shuffled tasks ``run_eval`` runs (seed 0 puts
    task 2 first)."""
    server.set_handler(roundtrips_its_word)
    setups = tmp_path / "setups"
    config = pad_config(server.base_url, setups, tmp_path / "out").model_copy(
        update={"num_tasks": 2, "num_rollouts": 2, "shuffle": True}
    )
    config.serve.pool = StaticPoolConfig(num_workers=1)
    local = await run_eval(load_environment(config.env), config)
    setups.unlink()
    episodes = await run_eval_server(config)
    picked = [[e.traces[0].task.data.idx for e in run] for run in (local, episodes)]
    assert picked == [[2, 2, 0, 0]] * 2
    traces = [t for e in episodes for t in e.traces]
    assert [t.reward for t in traces] == [1.0] * 4, [t.errors for t in traces]
    (started,) = [int(p) for p in setups.read_text().split()]  # one server for 4 rollouts
    pids = {int(t.tool_messages[0].content.rsplit("pid=", 1)[1]) for t in traces}
    assert pids == {started}
    wait_gone(pids)  # stopped with the env server
