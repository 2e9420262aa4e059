"""An environment worker collects young objects as the run it serves does (every
``RUN_YOUNG_THRESHOLD`` allocations, not CPython's 700), whether it was forked from vf-eval or
launched from a fresh interpreter: the collector was a quarter of a rollout's CPU at -c 256
(``benchmarks/eval_default_path.py``). Read from inside each rollout by a weight-0 reward."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from verifiers.processes.collector import RUN_YOUNG_THRESHOLD

ENV_SOURCE = """
import gc, os
import verifiers as vf

KEPT = []


def right(completion, answer) -> float:
    return float(completion[-1]["content"] == answer)


def young_threshold() -> float:
    return float(gc.get_threshold()[0])


def worker_pid() -> float:
    return float(os.getpid())


def load_environment(open_pipe=False):
    if open_pipe:  # a load that leaves a pipe open: workers come from a template, not a fork
        KEPT.append(os.pipe())
    rows = [{"question": f"q{i}", "answer": f"q{i}"} for i in range(4)]
    funcs = [right, young_threshold, worker_pid]
    return vf.SingleTurnEnv(dataset=rows, rubric=vf.Rubric(funcs=funcs, weights=[1.0, 0.0, 0.0]))
"""


@pytest.mark.parametrize("start", ["forked", "template"])
def test_a_worker_collects_as_the_run_it_serves(server, tmp_path, start):
    source, out = tmp_path / "src", tmp_path / "out"
    source.mkdir()
    (source / "vf_collector_probe.py").write_text(ENV_SOURCE)
    path = os.pathsep.join([str(source), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "OPENAI_API_KEY": "k"}
    command = [sys.executable, "-m", "verifiers.cli.eval", "vf-collector-probe", "-b"]
    command += [server.base_url, "-m", "m", "-n", "4", "-r", "1", "--env-workers", "1", "-v"]
    command += ["--output-dir", str(out)]
    if start == "template":
        command += ["-a", json.dumps({"open_pipe": True})]
    run = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    _, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr
    how = "forked from this process" if start == "forked" else "launched from a template"
    assert how in stderr
    (results,) = out.glob("evals/*/*/results.jsonl")
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == 4 and all(r["reward"] == 1.0 for r in rows)
    assert {r["metrics"]["young_threshold"] for r in rows} == {float(RUN_YOUNG_THRESHOLD)}
    assert run.pid not in {r["metrics"]["worker_pid"] for r in rows}  # each ran in a worker
