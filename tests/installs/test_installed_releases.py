"""An installed environment runs as the release its package names, on every path a user takes.

Real environment packages, written as 0.1.x, 0.1.10+ and 0.3.x environments are (the
requirement forms ``>=0.1.5``, ``==0.1.8``, ``>=0.1.10,<0.2``, ``>=0.3.0`` and none), are
installed with ``vf-install`` into a fresh virtualenv and loaded by id with no release set
anywhere: no ``VF_API_VERSION``, no ``vf.written_for``. Each then runs through ``vf-eval`` in
process and with env workers, ``env.evaluate`` from Python (with a default ``AsyncOpenAI``),
a ``vf-env-server``, and one ``vf-rl`` step; the release-dependent behaviour is read back from
what each path leaves: a probe reward encodes the message type, the state's keys and the task
column the reward functions saw, and the metric names say which monitor metrics and which
MathRubric name the release has."""

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

from verifiers.results import read_rows

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

# requirement -> (release it runs as, probe code, metric names)
OLD = {"correct_answer_reward_func", "probe"}  # 0.1.8: no monitor metrics, the old MathRubric name
NEW = {"correct_answer", "probe", "num_turns", "total_tool_calls", "echo_calls"}
FORMS = {
    "rel-ge-015": ('"verifiers>=0.1.5"', "0.1.5", 1 + 4, OLD),
    "rel-eq-018": ('"verifiers==0.1.8"', "0.1.8", 1 + 4, OLD),
    "rel-0110": ('"verifiers>=0.1.10,<0.2"', "0.1.10", 1 + 2 + 4, NEW),
    "rel-ge-030": ('"verifiers>=0.3.0"', "0.3.0", 2 + 4, NEW),
    "rel-none": ('"verifiers"', "0.3.1", 2 + 4, NEW),
}

ENVIRONMENT = '''
"""A tool environment as {release_hint} environments are written: a plain-string task column."""
import verifiers as vf
from datasets import Dataset


def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: what to echo
    """
    return text


def probe(completion, state, task, **kwargs) -> float:
    """What this release hands reward functions: 1 dict messages, 2 final_env_response in the
    state, 4 the task column as a name."""
    code = 0
    if isinstance(completion[-1], dict):
        code += 1
    if "final_env_response" in state:
        code += 2
    if task == "sums":
        code += 4
    return code / 8


def load_environment(**kwargs):
    rows = [{{"question": f"What is {{i}}+{{i}}?", "answer": str(2 * i), "task": "sums"}} for i in range(4)]
    rubric = vf.MathRubric()
    rubric.add_reward_func(probe, weight=1.0)
    return vf.ToolEnv(
        dataset=Dataset.from_list(rows), eval_dataset=Dataset.from_list(rows),
        tools=[echo], rubric=rubric, max_turns=3,
    )
'''


def solver(request: dict):
    """Calls ``echo`` once, then answers the sum in ``\\boxed{}``."""
    from verifiers.testing import Reply

    messages = request["messages"]
    if request.get("tools") and not any(m.get("role") == "tool" for m in messages):
        return Reply(content=None, tool_calls=[Reply.tool_call("echo", {"text": "hi"})])
    question = next(m["content"] for m in messages if m.get("role") == "user")
    i = int(re.search(r"What is (\d+)\+", question).group(1))
    return Reply(content=f"\\boxed{{{2 * i}}}")


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh virtualenv with this SDK and the five environment packages, each installed by
    ``vf-install`` from its own project directory. The heavy libraries (torch for vf-rl) come
    from the test interpreter's site-packages by a plain path line, which processes none of
    its ``.pth`` files: no environment installed there is visible here."""
    from uv import find_uv_bin

    root = tmp_path_factory.mktemp("releases")
    venv = root / "venv"
    subprocess.run([find_uv_bin(), "venv", "--python", sys.executable, str(venv)], check=True)
    site = Path(
        subprocess.check_output(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            text=True,
        ).strip()
    )
    (site / "zz_parent.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [
            find_uv_bin(),
            "pip",
            "install",
            "--python",
            str(venv / "bin" / "python"),
            "--no-deps",
            "-e",
            str(REPO),
        ],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr
    for name, (requirement, release, _, _) in FORMS.items():
        project = root / "src" / name
        module = name.replace("-", "_")
        project.mkdir(parents=True)
        (project / f"{module}.py").write_text(ENVIRONMENT.format(release_hint=release))
        (project / "pyproject.toml").write_text(
            textwrap.dedent(
                f"""\
                [project]
                name = "{name}"
                version = "0.1.0"
                dependencies = [{requirement}]
                [build-system]
                requires = ["hatchling"]
                build-backend = "hatchling.build"
                [tool.hatch.build]
                include = ["{module}.py"]
                """
            )
        )
        done = run(venv, "vf-install", str(project))
        assert done.returncode == 0, done.stdout + done.stderr
    return venv


def run(venv: Path, command: str, *args: str, cwd: Path | None = None, timeout: int = 300):
    env = {k: v for k, v in os.environ.items() if k not in ("VF_API_VERSION", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(venv / "bin" / command), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**env, "OPENAI_API_KEY": "x", "PATH": f"{venv / 'bin'}:{env['PATH']}"},
    )


def check_run(run_dir: Path, name: str) -> None:
    _, release, code, metrics = FORMS[name]
    rows = list(read_rows(run_dir / "results.jsonl"))
    assert len(rows) == 4 and all(r.get("error") is None for r in rows), rows[0]
    assert {round(r["metrics"]["probe"] * 8) for r in rows} == {code}
    assert set(rows[0]["metrics"]) == metrics
    assert all(r["reward"] == pytest.approx(1 + code / 8) for r in rows)  # the answer is right
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["release"] == release


@pytest.mark.parametrize("workers", ["--no-env-workers", "--env-workers=1"])
@pytest.mark.parametrize("name", list(FORMS))
def test_vf_eval_runs_each_installed_environment_as_its_release(
    venv, server, tmp_path, name, workers
):
    server.set_handler(solver)
    done = run(
        venv,
        "vf-eval",
        name,
        "-b",
        server.base_url,
        "-m",
        "m",
        "-n",
        "4",
        "-r",
        "1",
        workers,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"runs as verifiers │ {FORMS[name][1]}" in re.sub(r" +", " ", done.stdout)
    (run_dir,) = (tmp_path / "outputs" / "evals").glob(f"{name}--m/*")
    check_run(run_dir, name)


EVALUATE = """
import json, sys
from openai import AsyncOpenAI
import verifiers as vf
env = vf.load_environment(sys.argv[1])
workers = {"env_workers": int(sys.argv[3])} if sys.argv[3] != "in-process" else {}
out = env.evaluate_sync(AsyncOpenAI(base_url=sys.argv[2], api_key="x"), "m", num_examples=4, **workers)
print(json.dumps({"release": str(env.release), "probe": out.metrics["probe"],
                  "metrics": sorted(out.metrics), "errors": [s.get("error") for s in out.state]}))
"""


@pytest.mark.parametrize("env_workers", ["in-process", "1"])
def test_env_evaluate_from_python_with_a_default_client(venv, server, tmp_path, env_workers):
    server.set_handler(solver)
    for name, (_, release, code, metrics) in FORMS.items():
        done = run(venv, "python", "-c", EVALUATE, name, server.base_url, env_workers, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out["release"] == release and out["errors"] == [None] * 4
        assert {round(p * 8) for p in out["probe"]} == {code} and set(out["metrics"]) == metrics


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("name", list(FORMS))
def test_a_vf_env_server_runs_the_environment_as_its_release(venv, server, tmp_path, name):
    server.set_handler(solver)
    port = free_port()
    secret = tmp_path / "env-server.secret"
    secret.touch(mode=0o600)
    secret.write_text(os.urandom(32).hex())
    env = {k: v for k, v in os.environ.items() if k != "VF_API_VERSION"}
    hosted = subprocess.Popen(
        [
            *(
                str(venv / "bin" / "vf-env-server"),
                name,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ),
            *("--secret-file", str(secret), "--workers", "1"),
        ],
        env={**env, "OPENAI_API_KEY": "x"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        done = run(
            venv,
            "vf-eval",
            name,
            "-b",
            server.base_url,
            "-m",
            "m",
            "-n",
            "4",
            "-r",
            "1",
            "--env-server",
            f"127.0.0.1:{port}",
            "--env-secret-file",
            str(secret),
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        (run_dir,) = (tmp_path / "outputs" / "evals").glob(f"{name}--m/*")
        check_run(run_dir, name)
    finally:
        hosted.terminate()
        hosted.wait(timeout=30)


@pytest.fixture
def policy_dir(tmp_path_factory) -> Path:
    pytest.importorskip("torch")
    from support.toy import make_tiny_policy

    return make_tiny_policy(tmp_path_factory.mktemp("policy"))


@pytest.mark.parametrize("name", ["rel-eq-018", "rel-ge-030"])
def test_one_vf_rl_step_trains_on_the_environment_as_its_release(
    venv, policy_dir, tmp_path, name
):
    """The trainer's orchestrator loads the environment by id in env workers: a 0.1.8 one gives
    its reward functions dict messages, no ``final_env_response`` and the task name; a 0.3.0
    one typed messages, ``final_env_response`` and the task name."""
    config = tmp_path / "rl.toml"
    config.write_text(
        f'model = "{policy_dir}"\nenv_id = "{name}"\noutput_dir = "{tmp_path / "out"}"\nsteps = 1\n'
        "[orchestrator]\nexamples_per_step = 2\nrollouts_per_example = 2\nmax_tokens = 4\n"
        '[trainer]\nlr = 1e-3\nautocast = "none"\n[eval]\nevery = 0\n'
    )
    done = run(venv, "vf-rl", "@", str(config), timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = [
        json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    ]
    assert record["rollout_errors"] == 0
    # a random tiny policy never answers right: the reward is the probe's code alone
    assert record["reward"] == pytest.approx(FORMS[name][2] / 8)


@pytest.mark.parametrize("name", ["rel-eq-018", "rel-ge-030"])
def test_resume_and_rescore_keep_the_release(venv, server, tmp_path, name):
    """A resumed run and a rescored one load the environment by id again: same release."""
    server.set_handler(solver)
    args = ("-b", server.base_url, "-m", "m", "-n", "4", "-r", "1", "--no-env-workers")
    done = run(venv, "vf-eval", name, *args, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (run_dir,) = (tmp_path / "outputs" / "evals").glob(f"{name}--m/*")
    results = run_dir / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    results.write_text("".join(lines[:2]))  # as if killed after two rollouts
    meta = json.loads((run_dir / "metadata.json").read_text())
    (run_dir / "metadata.json").write_text(json.dumps({**meta, "status": "running"}))
    resumed = run(venv, "vf-eval", name, *args, "--resume", str(run_dir), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    check_run(run_dir, name)
    rescored = run(venv, "vf-eval", name, "--rescore", str(run_dir), cwd=tmp_path)
    assert rescored.returncode == 0, rescored.stdout + rescored.stderr
    (new_dir,) = [d for d in (tmp_path / "outputs" / "evals").glob(f"{name}--m/*") if d != run_dir]
    check_run(new_dir, name)
