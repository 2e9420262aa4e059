"""vf-eval's built-in model server answers only the run that started it.

A run with no ``-b`` serves its model with ``vf-serve`` on a loopback port. That server had no
key, so every local user could query the model (within the anonymous budget) while the run
lasted. It now has a key made for the run, handed over in the server's environment and the
environment workers' (never an argv)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from verifiers.results import read_rows

GATED_ENV = """
import asyncio
import os
from pathlib import Path

import verifiers as vf


async def gated(completion) -> float:
    # each rollout is scored only once the test has knocked on the server: the run is still on
    gate = Path(os.environ["VF_TEST_GATE"])
    for _ in range(1200):
        if gate.exists():
            return 1.0
        await asyncio.sleep(0.1)
    return 0.0


def load_environment():
    rows = [{"question": f"say {i}", "answer": str(i)} for i in range(2)]
    return vf.SingleTurnEnv(dataset=rows, rubric=vf.Rubric(funcs=[gated]))
"""


def _serve_process(run: subprocess.Popen, timeout: float = 240) -> psutil.Process:
    """The run's ``vf-serve`` child, once it answers ``/health``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()
        for child in psutil.Process(run.pid).children(recursive=True):
            try:
                argv = child.cmdline()
            except psutil.Error:
                continue
            if "verifiers.cli.serve" in argv:
                port = argv[argv.index("--port") + 1]
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        return child
                except httpx.HTTPError:
                    pass
        time.sleep(0.2)
    raise AssertionError("the built-in model server never answered /health")


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["env-workers", "in-process"])
def test_the_built_in_model_server_answers_only_its_run(tiny_dir, tmp_path, workers):
    source = tmp_path / "src"
    source.mkdir()
    (source / "vf_builtin_probe.py").write_text(GATED_ENV)
    gate = tmp_path / "gate"
    argv = [sys.executable, "-m", "verifiers.cli.eval", "vf-builtin-probe", "-m", str(tiny_dir)]
    argv += ["-n", "2", "-r", "1", "-t", "4", "--output-dir", str(tmp_path / "out")]
    if workers == "in-process":
        argv.append("--no-env-workers")
    env = {**os.environ, "PYTHONPATH": str(source), "VF_TEST_GATE": str(gate)}
    env.pop("VF_ENV_WORKER_API_KEY", None)
    run = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        serve = _serve_process(run)
        port = serve.cmdline()[serve.cmdline().index("--port") + 1]
        base = f"http://127.0.0.1:{port}/v1"
        # anyone else on this machine: no key, no answer (before: 200s within a budget)
        assert httpx.get(f"{base}/models", timeout=10).status_code == 401
        chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        assert httpx.post(f"{base}/chat/completions", json=chat, timeout=10).status_code == 401
        wrong = {"Authorization": "Bearer not-the-key"}
        assert httpx.get(f"{base}/models", headers=wrong, timeout=10).status_code == 401
        # the key is on no command line of the run's processes
        key = serve.environ().get("VF_SERVE_API_KEY", "")
        assert len(key) >= 32
        tree = [psutil.Process(run.pid), *psutil.Process(run.pid).children(recursive=True)]
        assert not [p.pid for p in tree if key in " ".join(p.cmdline())]
        gate.touch()
        _, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, err
    # the run itself (in this process, or its workers) was answered every time
    (results,) = (tmp_path / "out").glob("evals/*/*/results.jsonl")
    rows = list(read_rows(results))
    assert len(rows) == 2
    assert all(not row.get("error") and row["reward"] == 1.0 for row in rows), json.dumps(rows)
    assert Path(results).stat().st_size > 0
