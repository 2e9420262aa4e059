"""vf-eval forks its environment workers from itself right after it loads the environment: the
workers cost no interpreter start, import or load of their own, and are still processes of
their own (a segfaulting reward costs only its rollouts). Driven through a real vf-eval process
(single-threaded, as a user runs it) against the scripted model server on loopback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from verifiers.workers.forked import fork_safe, open_channels

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="workers are forked from the caller on Linux"
)

ENV_SOURCE = '''
import ctypes, os
from pathlib import Path
import verifiers as vf

FLAGS = Path(os.environ["VF_TEST_FLAGS"])
(FLAGS / f"imported-{os.getpid()}").touch()
KEPT = []


def scored(completion, answer, info) -> float:
    """Where each reward ran; a segfault where info says."""
    if info.get("segfault"):
        ctypes.string_at(0)
    (FLAGS / f"scored-{os.getpid()}").touch()
    return float(completion[-1]["content"] == answer)


def load_environment(open_pipe=False):
    (FLAGS / f"loaded-{os.getpid()}").touch()
    if open_pipe:  # what a load that connects somewhere leaves open
        KEPT.append(os.pipe())
    rows = [
        {"question": f"q{i}", "answer": f"q{i}", "info": {"segfault": i == 1}} for i in range(4)
    ]
    return vf.SingleTurnEnv(dataset=rows, rubric=vf.Rubric(funcs=[scored]))
'''


def _vf_eval(server, tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess, int]:
    source, out, marks = tmp_path / "src", tmp_path / "out", tmp_path / "flags"
    for folder in (source, out, marks):
        folder.mkdir(exist_ok=True)
    (source / "vf_forked_probe.py").write_text(ENV_SOURCE)
    path = os.pathsep.join([str(source), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "VF_TEST_FLAGS": str(marks), "OPENAI_API_KEY": "k"}
    command = [sys.executable, "-m", "verifiers.cli.eval", "vf-forked-probe", "-b"]
    command += [server.base_url, "-m", "m", "-n", "4", "-r", "1", "--env-workers", "2", "-v"]
    proc = subprocess.Popen(
        [*command, "--output-dir", str(out), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    stdout, stderr = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), proc.pid


def _pids(marks: Path, kind: str) -> set[int]:
    return {int(p.name.rsplit("-", 1)[1]) for p in marks.glob(f"{kind}-*")}


def _rows(out: Path) -> list[dict]:
    (results,) = out.glob("evals/*/*/results.jsonl")
    return [json.loads(line) for line in results.read_text().splitlines()]


def test_vf_eval_forks_its_workers_from_itself_and_a_segfault_costs_only_its_rollout(
    server, tmp_path
):
    """The environment is imported and loaded once, by vf-eval; the rewards run in its forked
    workers (never in vf-eval), and the worker a reward segfaults is replaced: the run ends
    normally with that rollout's error alone. A template forked from vf-eval beside the
    workers forks the replacement and the workers for suspects, so even after the death no
    process but vf-eval imported the environment (a template started at the first death
    imported it again, seconds in which the dead worker's groups waited). ``-v`` says how the
    workers started and when the first rollout finished."""
    done, pid = _vf_eval(server, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 env worker(s) forked from this process with its loaded environment" in done.stderr
    assert re.search(r"first rollout finished \d+\.\d\d s after start", done.stderr)
    marks = tmp_path / "flags"
    scored, loaded = _pids(marks, "scored"), _pids(marks, "loaded")
    assert loaded == {pid} and _pids(marks, "imported") == {pid} and pid not in scored
    assert scored - loaded, (scored, loaded)  # a forked worker scored without loading it
    rows = sorted(_rows(tmp_path / "out"), key=lambda r: r["example_id"])
    assert [r["reward"] for r in rows] == [1.0, 0.0, 1.0, 1.0]
    assert rows[1]["error"] and "SIGSEGV" in rows[1]["error"]["message"]
    assert not any(r["error"] for i, r in enumerate(rows) if i != 1)
    (metadata,) = (tmp_path / "out").glob("evals/*/*/metadata.json")
    workers = json.loads(metadata.read_text())["env_workers"]
    assert workers["restarts"] >= 1 and workers["isolation_workers"] >= 1, workers


def test_an_environment_whose_load_opens_a_pipe_gets_workers_that_load_it_themselves(
    server, tmp_path
):
    """A forked worker would share what the load opened (a connection, a server's pipe) with
    vf-eval and every other worker: such an environment's workers come from a template process
    and load it themselves, and ``-v`` says why."""
    done, pid = _vf_eval(server, tmp_path, "--env-args", '{"open_pipe": true}')
    assert done.returncode == 0, done.stderr[-3000:]
    assert "launched from a template process" in done.stderr
    assert "opened a socket or pipe" in done.stderr
    assert _pids(tmp_path / "flags", "loaded") - {pid}  # the workers loaded it themselves


def test_fork_safety_is_refused_by_a_new_pipe_or_a_second_thread():
    """What ``fork_safe`` checks, on this process: a pipe opened since the mark, or a thread
    running, either makes forking from here unsafe."""
    before = open_channels()
    read, write = os.pipe()
    try:
        assert {read, write} <= open_channels()
        assert not fork_safe(before)
    finally:
        os.close(read)
        os.close(write)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not fork_safe(open_channels())
    finally:
        stop.set()
        thread.join()
