"""``vf-rl`` as a user runs it: checkpoints, plots and resume, limits and devices checked before
anything starts, one-line config mistakes, Ctrl-C, and serve/rl kept apart."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.slow
def test_vf_rl_cli_runs_checkpoints_plots_and_resumes(policy_dir, tmp_path, left_by_the_dead):
    import json
    import shutil
    import subprocess
    import sys

    config = tmp_path / "rl.toml"
    config.write_text(
        f'model = "{policy_dir}"\nenv_id = "reverse-text"\noutput_dir = "{tmp_path / "out"}"\nsteps = 2\n'
        "checkpoint_every = 1\n[orchestrator]\nexamples_per_step = 2\nrollouts_per_example = 2\nmax_tokens = 8\n"
        '[trainer]\nlr = 1e-3\nautocast = "none"\n[eval]\nevery = 1\nexamples = 3\n'
    )
    first = subprocess.run(
        [sys.executable, "-m", "verifiers.cli.rl", "@", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    out = tmp_path / "out"
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 1]
    # the environment (loaded by id) ran in worker processes, as vf-eval runs it, and reached
    # the inference server with the run's key (without it, every rollout is a 401)
    assert all(r["env_workers"] >= 1 and r["env_worker_restarts"] == 0 for r in records)
    assert all(r["rollout_errors"] == 0 for r in records), records
    evals = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert evals and all(e["eval_errors"] == 0 for e in evals), evals
    assert (out / "metrics.png").stat().st_size > 1000 and (
        out / "checkpoints" / "step_000002" / "trainer.pt"
    ).exists()
    assert (out / "weights" / "config.json").exists() and (
        out / "weights" / "model.safetensors"
    ).exists()
    (out / "weights" / "model.safetensors").unlink()
    effective = json.loads((out / "config.json").read_text())["trainer"]
    assert effective["loss"] == {
        "name": "grpo",
        "clip_low": 0.2,
        "clip_high": 0.2,
        "delta": None,
        "advantage": "group_mean_std",
    }
    assert "loss grpo (clip_low 0.2, clip_high 0.2; sequence_mean" in first.stdout
    # stdout is no terminal here: rich's live table draws nothing, so the progress is lines
    lines = first.stdout.splitlines()
    assert "step 0: generating rollouts, then training (0 s)" in lines, first.stdout
    assert any(line.startswith("step 0 · reward ") for line in lines), first.stdout
    assert any(line.startswith("step 1 · reward ") for line in lines), first.stdout
    again = subprocess.run(  # a second run into the same dir would mix the two
        [sys.executable, "-m", "verifiers.cli.rl", "@", str(config)], capture_output=True, text=True
    )
    assert again.returncode == 2 and "already holds a run" in again.stdout
    nothing = subprocess.run(
        [
            sys.executable,
            "-m",
            "verifiers.cli.rl",
            "@",
            str(config),
            "--resume",
            "--output_dir",
            str(tmp_path / "empty"),
        ],
        capture_output=True,
        text=True,
    )
    assert nothing.returncode == 2 and "there is no run in" in nothing.stdout
    assert not (tmp_path / "empty").exists()  # a refused run leaves no directory behind
    # resume from step 1: the records of step 1 are redone, not appended after it
    shutil.rmtree(out / "checkpoints" / "step_000002")
    # a save killed on another host, or before a reboot: only the run's holder can tell it is dead
    killed_save = out / "checkpoints" / left_by_the_dead(".step_000002-", elsewhere=True)
    (killed_save / "dcp").mkdir(parents=True)
    resumed = subprocess.run(  # and the rest of the run with weights over a gloo group
        [
            *(sys.executable, "-m", "verifiers.cli.rl", "@", str(config)),
            *("--steps", "3", "--resume", "--inference.weight_transport", "gloo"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming from" in resumed.stdout and "(step 1)" in resumed.stdout
    assert not killed_save.exists()
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 1, 2]
    assert [r["served_version"] for r in records] == [1, 2, 3]
    assert all(r["tokens"] > 0 and r["tokens_per_s"] > 0 for r in records)
    # held-out evaluation before the first step, after each, and after the resumed one
    evals = [json.loads(line) for line in (out / "eval.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evals] == [0, 1, 2, 3]
    assert [e["policy_version"] for e in evals] == [0, 1, 2, 3]
    assert all(e["eval_rollouts"] == 3 and e["eval_errors"] == 0 for e in evals)
    assert "held-out reward after 3 steps" in resumed.stdout
    assert (out / "weights" / "model.safetensors").exists()  # the trained model, at the end


def test_model_limits_are_checked_before_vllm_starts(policy_dir):
    """vLLM refuses a context longer than the model's positions, and one GPU shared by the
    trainer and a vLLM that reserves most of it runs out of memory: vf-rl says so first."""
    from verifiers.rl.training.rl import RLConfig, model_problem, parameter_count

    def config(**inference):
        return RLConfig.model_validate(
            {"inference": {"backend": "vllm", "device": "cuda", **inference}}
        )

    too_long = model_problem(config(max_model_len=1024), policy_dir, "cuda:1", gpu_bytes=2**34)
    assert "longer than the model's 512 positions" in too_long
    assert model_problem(config(max_model_len=512), policy_dir, "cuda:1", gpu_bytes=2**34) is None
    params = parameter_count(policy_dir)
    assert 10_000 < params < 1_000_000  # the toy policy, counted without allocating it
    gpu = 64 * params  # a GPU four times the trainer's 16 bytes a parameter
    crowded = model_problem(config(gpu_memory_utilization=0.9), policy_dir, "cuda:0", gpu_bytes=gpu)
    assert "share cuda:0" in crowded and "gpu_memory_utilization to at most" in crowded
    assert (
        model_problem(config(gpu_memory_utilization=0.2), policy_dir, "cuda:0", gpu_bytes=gpu)
        is None
    )
    # on another GPU, vLLM may take all of its own
    assert (
        model_problem(
            config(device="cuda:1", gpu_memory_utilization=0.95),
            policy_dir,
            "cuda:0",
            gpu_bytes=gpu,
        )
        is None
    )


def test_device_choices_that_cannot_work_are_refused_up_front():
    from verifiers.rl.training.rl import RLConfig, device_problem, trainer_device

    def config(**inference) -> RLConfig:
        return RLConfig.model_validate({"inference": inference})

    assert trainer_device(config(), cuda_available=True) == "cpu"
    assert trainer_device(config(device="cuda"), cuda_available=False) == "cpu"
    assert device_problem(config(), "cpu") is None
    assert "needs inference.device" in device_problem(config(backend="vllm"), "cpu")
    one_gpu = config(backend="vllm", device="cuda", weight_transport="nccl")
    assert "two different GPUs" in device_problem(one_gpu, "cuda:0")
    two_gpus = config(backend="vllm", device="cuda:1", weight_transport="nccl")
    assert device_problem(two_gpus, "cuda:0") is None
    assert device_problem(config(device="cuda", weight_transport="gloo"), "cuda:0") is None


# Run in a fresh interpreter: says whether the refusal came before torch was imported.
_REFUSED_BEFORE_TORCH = (
    "import sys\n"
    "from verifiers.cli.{module} import main\n"
    "code = main(sys.argv[1:])\n"
    "print('torch imported' if 'torch' in sys.modules else 'torch not imported')\n"
    "sys.exit(code)\n"
)


@pytest.mark.parametrize(
    ("module", "flags", "message"),
    [
        ("rl", ["--env_id", "nope-env"], "no environment 'nope-env' is installed"),
        ("rl", ["--model", "{tmp}/nowhere"], "is not a local directory"),
        ("rl", ["--model", "{tmp}"], "has no config.json"),
        ("rl", ["--inference.weight_transport", "nccl"], "two different GPUs"),
        ("sft", ["--model", "no-such-model"], "not an embedded model"),
        ("sft", ["--data.path", "{tmp}/none.jsonl"], "none.jsonl"),
    ],
    ids=["rl-env", "rl-model", "rl-model-dir", "rl-nccl-on-cpu", "sft-model", "sft-data"],
)
def test_a_run_that_names_what_is_not_there_is_refused_before_torch_loads(
    policy_dir, tmp_path, module, flags, message
):
    """A mistyped environment, model or data path, or a transport the devices cannot carry,
    is one line and exit 2 within a second: nothing heavy is imported first."""
    import subprocess
    import sys

    data = tmp_path / "data.jsonl"
    data.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    base = {
        "rl": ["--model", str(policy_dir), "--env_id", "reverse-text"],
        "sft": ["--model", str(policy_dir), "--data.path", str(data)],
    }[module]
    flags = [f.replace("{tmp}", str(tmp_path)) for f in flags]
    result = subprocess.run(
        [
            *(sys.executable, "-c", _REFUSED_BEFORE_TORCH.format(module=module)),
            *(*base, *flags, "--output_dir", str(tmp_path / "out")),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and message in result.stdout, result.stdout + result.stderr
    assert "torch not imported" in result.stdout and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("module", ["rl", "sft"])
def test_a_run_directory_in_use_is_refused_and_left_as_it_was(policy_dir, tmp_path, module):
    """A second run, or a --resume, started into a directory whose run is still going would mix
    two runs' metrics and checkpoints: refused at once, the directory untouched."""
    import subprocess
    import sys

    from verifiers.rl.run.lock import run_dir_lock

    out = tmp_path / "out"
    (out / "checkpoints" / "step_000001").mkdir(parents=True)
    (out / "metrics.jsonl").write_text('{"step": 0}\n')
    data = tmp_path / "data.jsonl"
    data.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    inputs = {"rl": ["--env_id", "reverse-text"], "sft": ["--data.path", str(data)]}[module]
    with run_dir_lock(out) as hold:  # the run that is still going
        assert hold.held
        before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
        for resume in (["--resume"], []):
            result = subprocess.run(
                [
                    *(sys.executable, "-c", _REFUSED_BEFORE_TORCH.format(module=module)),
                    *("--model", str(policy_dir), *inputs, "--output_dir", str(out), *resume),
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert result.returncode == 2, result.stdout + result.stderr
            assert "is in use by a run that is still going" in result.stdout
            assert "torch not imported" in result.stdout
        assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


def test_a_run_directory_is_held_by_its_run_alone(tmp_path):
    """The lock goes with the run: not kept by a child it forked (multiprocessing's default)
    after the run died, not taken through a dangling link; a directory the run made and left
    empty is removed."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from verifiers.rl.run.lock import RUN_LOCK, run_dir_lock

    out = tmp_path / "out"
    dies_leaving_a_child = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from verifiers.rl.run.lock import run_dir_lock\n"
        "with run_dir_lock(Path(sys.argv[1])) as hold:\n"
        "    assert hold.held\n"
        "    child = os.fork()\n"
        "    if child == 0:\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "    print(child, flush=True)\n"
        "    os._exit(0)\n"
    )
    run = subprocess.Popen(
        [sys.executable, "-c", dies_leaving_a_child, str(out)], stdout=subprocess.PIPE, text=True
    )
    assert run.stdout is not None
    child = int(run.stdout.readline())
    run.wait()

    def child_holds_the_lock_file() -> bool:
        try:
            fds = os.listdir(f"/proc/{child}/fd")
        except OSError:
            return False
        for fd in fds:
            try:
                if os.readlink(f"/proc/{child}/fd/{fd}").endswith(RUN_LOCK):
                    return True
            except OSError:
                continue
        return False

    # the child closes the lock file as it starts (an at-fork handler); on a busy machine it
    # may not have run yet when its parent is already gone
    deadline = time.monotonic() + 10
    while child_holds_the_lock_file() and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        os.kill(child, 0)  # alive
        with run_dir_lock(out) as hold:  # and it does not hold the dead run's directory
            assert hold.held and hold.problem is None
    finally:
        os.kill(child, signal.SIGKILL)
    assert (out / RUN_LOCK).exists()  # the directory was the dead run's: kept
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with run_dir_lock(tmp_path / "dangling") as hold:
        assert not hold.held and "cannot use" in (hold.problem or "")
    with run_dir_lock(tmp_path / "fresh") as hold:
        assert hold.held
    assert not (tmp_path / "fresh").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["@", "/nonexistent.toml"], "no config file /nonexistent.toml"),
        (["@", "{bad}"], "is not valid TOML"),
        (["--steps"], "expected '--key value'"),
        (["--steps", "0"], "invalid config"),
        (["--trainer.lrr", "1e-3"], "trainer.lrr"),
    ],
)
def test_vf_rl_config_mistakes_are_one_line_and_exit_2(tmp_path, argv, message):
    import subprocess
    import sys

    bad = tmp_path / "bad.toml"
    bad.write_text("steps = = 3\n")
    argv = [a.replace("{bad}", str(bad)) for a in argv]
    result = subprocess.run(
        [sys.executable, "-m", "verifiers.cli.rl", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and message in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_and_rl_do_not_import_each_other():
    """Weight updates live in verifiers.weights; the server and the trainer both use it."""
    import ast

    root = Path(__file__).resolve().parents[2] / "verifiers"

    def imports(package):
        for path in (root / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module:
                    yield path.name, node.module

    def within(module, package):
        return module == package or module.startswith(package + ".")

    assert not [m for _, m in imports("serve") if within(m, "verifiers.rl")]
    assert not [m for _, m in imports("rl") if within(m, "verifiers.serve")]
    assert not [
        m
        for _, m in imports("weights")
        if within(m, "verifiers.rl") or within(m, "verifiers.serve")
    ]


@pytest.mark.slow
@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_run_resumes_with_the_line_it_printed(policy_dir, tmp_path, sig, when):
    """vf-rl stopped before any checkpoint was a dead end: --resume said 'run without
    --resume', and running without it said 'continue with --resume'. Stopped before or after
    its first checkpoint, it prints its own command line with --resume; that line alone
    finishes the run, whose records are an uninterrupted run's (one per step, none twice)."""
    import subprocess
    import sys
    import time

    from support.trainer_runs import stop_and_resume_line

    out = tmp_path / "out"
    config = tmp_path / "rl.toml"
    config.write_text(
        f'model = "{policy_dir}"\nenv_id = "reverse-text"\noutput_dir = "{out}"\nsteps = 4\n'
        "checkpoint_every = 2\n[orchestrator]\nexamples_per_step = 2\nrollouts_per_example = 2\n"
        "max_tokens = 8\n"
    )
    # "before": stopped once step 0 is recorded, before step 1 ends with the first checkpoint.
    # Step 1 takes ~0.1 s (its rollouts were made during step 0), so a signal can land after
    # it; such a try is not the case under test and is made again in a fresh directory.
    for _ in range(3):
        shutil.rmtree(out, ignore_errors=True)
        process = subprocess.Popen(
            [sys.executable, "-m", "verifiers.cli.rl", "@", str(config)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "COLUMNS": "400"},
        )
        mark = out / ("metrics.jsonl" if when == "before" else "checkpoints/step_000002")
        deadline = time.monotonic() + 240
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        printed, output = stop_and_resume_line(process, sig)
        assert printed == f"vf-rl @ {config} --resume", output
        checkpointed = (out / "checkpoints").is_dir() and any((out / "checkpoints").iterdir())
        if when == "after" or not checkpointed:
            break
        # the hint names what is on disk, whichever case this try became
        assert "continue with --resume (from step_000002)" in output
    if when == "before":
        assert not checkpointed, "every try was stopped after its first checkpoint"
        assert "--resume starts this run again from step 0" in output
    else:
        assert "continue with --resume (from step_000002)" in output
    resumed = subprocess.run(
        [sys.executable, "-m", "verifiers.cli.rl", *printed.split()[1:]],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    if when == "before":
        assert "starting the run again from step 0" in resumed.stdout
    else:
        assert "resuming from" in resumed.stdout and "(step 2)" in resumed.stdout
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 1, 2, 3]  # the stopped run's steps redone once
    assert [r["served_version"] for r in records] == [1, 2, 3, 4]
    checkpoints = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert checkpoints == ["step_000002", "step_000004"]
    assert (out / "weights" / "model.safetensors").exists()


EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "rl").glob("*.toml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_config_is_a_valid_vf_rl_config_for_an_installed_environment(path):
    """The configs the docs tell users to run parse as written (no misspelt key) and name an
    environment this checkout installs, with arguments its load_environment accepts."""
    from verifiers.cli.rl import parse_args

    config, resume = parse_args(["@", str(path)])
    assert not resume and config.steps > 0
    import verifiers as vf

    env = vf.load_environment(config.env_id, **config.env_args)
    assert len(env.get_eval_dataset(n=1)) == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a directory as another user (uid 65534)")
@pytest.mark.parametrize("module", ["rl", "sft"])
def test_an_output_dir_another_user_made_first_is_refused(policy_dir, tmp_path, module):
    """uid 65534 made the --output_dir in /tmp first, with a link where config.json goes: the
    run wrote through it, and a later --resume ran their checkpoint as this user."""
    import shutil
    import subprocess
    import sys
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="vf-shared-", dir="/tmp"))
    shared.chmod(0o1777)
    try:
        out = shared / "run"
        subprocess.run(
            ["sh", "-c", f"mkdir {out} && ln -s /etc/vf-not-here {out}/config.json"],
            check=True,
            user=65534,
            group=65534,
        )
        data = tmp_path / "data.jsonl"
        data.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
        inputs = {"rl": [], "sft": ["--data.path", str(data)]}[module]
        config = tmp_path / "run.toml"
        config.write_text(f'model = "{policy_dir}"\noutput_dir = "{out}"\nsteps = 1\n')
        done = subprocess.run(
            [sys.executable, "-m", f"verifiers.cli.{module}", "@", str(config), *inputs],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and "belongs to uid 65534" in done.stdout, done.stdout
        assert sorted(p.name for p in out.iterdir()) == ["config.json"]  # nothing written
        assert not Path("/etc/vf-not-here").exists()
        mine = tmp_path / "mine"
        mine.mkdir()
        mine.chmod(0o777)  # anyone may plant in it
        config.write_text(f'model = "{policy_dir}"\noutput_dir = "{mine}"\nsteps = 1\n')
        done = subprocess.run(
            [sys.executable, "-m", f"verifiers.cli.{module}", "@", str(config), *inputs],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and "may be changed by anyone" in done.stdout, done.stdout
    finally:
        shutil.rmtree(shared)
