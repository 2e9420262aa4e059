"""The env-server protocol against the real thing: PyPI's ``verifiers==0.3.1`` in its own venv.

Both directions, on a tool environment written as 0.3.x environments are (``datasets.Dataset``,
``vf.ToolEnv``, two tools over two turns; the packages under ``environments/`` use this SDK's
``vf.ToolRubric`` and plain-list datasets, which 0.3.1 does not have), installed into each venv:

- upstream's ``env.evaluate`` through its ``ZMQEnvClient`` -> this SDK's ``vf-env-server --no-auth``;
- this SDK's ``env.evaluate(AsyncOpenAI(...), env_workers=RemoteWorkers([...]))`` -> upstream's
  ``ZMQEnvServer`` (which answers 0.1.11+'s ``RolloutOutput`` rows, not the snapshots this SDK's
  ``output: "state"`` asks of its own server).

Each run's rows (prompt, completion, reward, metrics, error per rollout) must equal those of the
same environment run in process by this SDK against the same scripted model. The module is
skipped where the package index cannot be reached."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import sysconfig
import textwrap
import time
from pathlib import Path

import pytest

from verifiers.processes.server import free_port

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "tests" / "support" / "upstream_driver.py"
UPSTREAM = "verifiers==0.3.1"
pytestmark = pytest.mark.slow

ENVIRONMENT = '''
"""A tool environment written as verifiers 0.3.x environments are: two tools over two turns."""
import verifiers as vf
from datasets import Dataset

CAPITALS = {"france": "Paris", "japan": "Tokyo", "kenya": "Nairobi", "peru": "Lima"}


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first
        b: the second
    """
    return a + b


def capital(country: str) -> str:
    """The capital city of a country.

    Args:
        country: the country, lowercase
    """
    return CAPITALS[country]


def correct(completion, answer, **kwargs) -> float:
    last = completion[-1]
    text = last["content"] if isinstance(last, dict) else last.content
    return float((text or "").strip() == answer)


def load_environment(**kwargs):
    rows = [
        {
            "question": f"Add {i} and {2 * i}, then name the capital of {country}.",
            "answer": f"{3 * i} {CAPITALS[country]}",
            "info": {"country": country},
        }
        for i, country in zip(range(1, 5), CAPITALS)
    ]
    return vf.ToolEnv(
        dataset=Dataset.from_list(rows),
        eval_dataset=Dataset.from_list(rows),
        tools=[add, capital],
        rubric=vf.Rubric(funcs=[correct]),
        max_turns=4,
        system_prompt="Use the tools, then answer.",
    )
'''


def solver(request: dict):
    """``add`` in the first turn, ``capital`` in the second, then the two results."""
    from verifiers.testing import Reply

    messages = request["messages"]
    results = [m["content"] for m in messages if m.get("role") == "tool"]
    question = next(m["content"] for m in messages if m.get("role") == "user")
    a, b, country = re.search(
        r"Add (\d+) and (\d+), then name the capital of (\w+)", question
    ).groups()
    if not results:
        call = Reply.tool_call("add", {"a": int(a), "b": int(b)}, "call_add")
        return Reply(content=None, tool_calls=[call])
    if len(results) == 1:
        call = Reply.tool_call("capital", {"country": country}, "call_capital")
        return Reply(content="Now the capital.", tool_calls=[call])
    return Reply(content=" ".join(results))


def _uv(*args: str) -> subprocess.CompletedProcess:
    from uv import find_uv_bin

    return subprocess.run(
        [find_uv_bin(), *args], capture_output=True, text=True, timeout=600, env=_env()
    )


def _env() -> dict[str, str]:
    """The children's environment: no PYTHONPATH (it would put this SDK in upstream's venv)."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "VF_API_VERSION")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "OPENAI_API_KEY": "x"}


@pytest.fixture(scope="module")
def venvs(tmp_path_factory) -> dict[str, Path]:
    """``upstream``: PyPI's verifiers 0.3.1 and the environment; ``ours``: this SDK (heavy
    libraries by a path line to the test interpreter's site-packages) and the environment."""
    root = tmp_path_factory.mktemp("upstream-interop")
    project = root / "vf_interop_tools"
    project.mkdir()
    (project / "vf_interop_tools.py").write_text(ENVIRONMENT)
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [project]
            name = "vf-interop-tools"
            version = "0.1.0"
            dependencies = ["verifiers>=0.3.1", "datasets"]
            [build-system]
            requires = ["hatchling"]
            build-backend = "hatchling.build"
            [tool.hatch.build]
            include = ["vf_interop_tools.py"]
            """
        )
    )
    venvs = {name: root / name for name in ("upstream", "ours")}
    for venv in venvs.values():
        done = _uv("venv", "--python", sys.executable, str(venv))
        assert done.returncode == 0, done.stderr
    python = {name: str(venv / "bin" / "python") for name, venv in venvs.items()}
    done = _uv("pip", "install", "--python", python["upstream"], UPSTREAM)
    if done.returncode != 0:
        pytest.skip(f"could not install {UPSTREAM} from the package index: {done.stderr[-500:]}")
    site = subprocess.check_output(
        [python["ours"], "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        text=True,
    ).strip()
    (Path(site) / "zz_parent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for name, extra in (("upstream", ()), ("ours", ("-e", str(REPO)))):
        # --no-deps: the environment's `verifiers` requirement is the venv's own SDK
        done = _uv("pip", "install", "--python", python[name], "--no-deps", *extra, str(project))
        assert done.returncode == 0, done.stderr
    return venvs


def _run(venv: Path, *args: str, timeout: int = 180) -> list[dict]:
    done = subprocess.run(
        [str(venv / "bin" / "python"), str(DRIVER), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("ROWS ")]
    return json.loads(line.removeprefix("ROWS "))


def _start(command: list[str], port: int) -> subprocess.Popen:
    hosted = subprocess.Popen(
        command, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and hosted.poll() is None:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return hosted
        time.sleep(0.2)
    _stop(hosted)
    raise AssertionError(f"the env server did not listen on {port}: {hosted.stdout.read()}")


def _stop(hosted: subprocess.Popen) -> None:
    hosted.terminate()
    try:
        hosted.wait(timeout=30)
    except subprocess.TimeoutExpired:
        hosted.kill()
        hosted.wait(timeout=30)


def _expected(venvs: dict[str, Path], base_url: str) -> list[dict]:
    rows = _run(venvs["ours"], "inproc", base_url)
    assert len(rows) == 8 and all(r["error"] is None for r in rows)
    assert all(r["reward"] == 1.0 for r in rows)  # both tools ran and the answer is right
    assert {len(r["completion"]) for r in rows} == {5}
    assert set(rows[0]["metrics"]) >= {"correct", "num_turns", "total_tool_calls"}
    return rows


def test_upstream_zmq_env_client_against_vf_env_server(venvs, server):
    """Upstream's ``env.evaluate`` with its ``ZMQEnvClient`` on this SDK's server."""
    server.set_handler(solver)
    expected = _expected(venvs, server.base_url)
    port = free_port()
    command = [str(venvs["ours"] / "bin" / "vf-env-server"), "vf-interop-tools", "--no-auth"]
    hosted = _start([*command, "--port", str(port), "--workers", "1"], port)
    try:
        got = _run(venvs["upstream"], "upclient", f"127.0.0.1:{port}", server.base_url)
    finally:
        _stop(hosted)
    assert got == expected


def test_remote_workers_against_upstream_zmq_env_server(venvs, server):
    """This SDK's ``env.evaluate(AsyncOpenAI(...), env_workers=RemoteWorkers([...]))`` on
    upstream's ``ZMQEnvServer``."""
    server.set_handler(solver)
    expected = _expected(venvs, server.base_url)
    port = free_port()
    python = str(venvs["upstream"] / "bin" / "python")
    hosted = _start([python, str(DRIVER), "upserver", str(port)], port)
    try:
        got = _run(venvs["ours"], "ourclient", f"127.0.0.1:{port}", server.base_url)
    finally:
        _stop(hosted)
    assert got == expected
