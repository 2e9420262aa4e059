"""The trainer step: schedules, settings checked against the registries, gradient
checkpointing, the GPU step against the CPU one, FSDP2 data parallelism and its checkpoints."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


from support.trainer_runs import cuda, random_samples, torchrun  # noqa: E402

from verifiers.rl.algorithm.advantages import ESTIMATORS  # noqa: E402
from verifiers.rl.algorithm.losses import LOSSES  # noqa: E402


def test_lr_schedules_warm_up_then_decay_to_the_floor():
    from verifiers.rl.algorithm.schedules import lr_factor

    def curve(name, min_ratio=0.0):
        return [lr_factor(name, s, 2, 6, min_ratio) for s in range(8)]

    assert curve("constant") == [0.5, 1, 1, 1, 1, 1, 1, 1]
    assert curve("linear") == pytest.approx([0.5, 1, 1, 0.75, 0.5, 0.25, 0, 0])
    assert curve("cosine") == pytest.approx([0.5, 1, 1, 0.853553, 0.5, 0.146447, 0, 0], abs=1e-6)
    assert curve("linear", 0.1) == pytest.approx([0.5, 1, 1, 0.775, 0.55, 0.325, 0.1, 0.1])
    with pytest.raises(ValueError, match="unknown LR schedule 'cosin'"):
        lr_factor("cosin", 0, 0, 10)


def test_trainer_follows_the_schedule_and_refuses_unknown_settings(tiny_model):
    import copy

    from verifiers.rl.algorithm.trainer import Trainer
    from verifiers.rl.configs.rl import TrainerConfig

    settings = TrainerConfig(lr=1.0, warmup_steps=1, schedule="linear")
    trainer = Trainer(copy.deepcopy(tiny_model), settings, total_steps=3)
    lrs = [trainer.optimizer.param_groups[0]["lr"]]
    for _ in range(3):
        trainer.train_step(random_samples())
        lrs.append(trainer.optimizer.param_groups[0]["lr"])
    assert lrs == pytest.approx([1.0, 1.0, 0.5, 0.0])  # warmup of 1 step: full LR at once
    from pydantic import ValidationError

    for bad in ({"schedule": "cosin"}, {"loss": "ppo"}, {"autocast": "fp8"}, {"clip_low": 0.1}):
        with pytest.raises(ValidationError):
            TrainerConfig(**bad)


def test_config_choices_match_the_registries():
    """vf-rl validates names up front (a typo fails before any model loads); the choices it
    offers must be exactly what the trainer and orchestrator implement."""
    import typing

    from verifiers.rl.algorithm.schedules import SCHEDULES
    from verifiers.rl.configs.rl import LOSS_NAMES, GRPOLoss, TrainerConfig

    def choices(model, field):
        return set(typing.get_args(model.model_fields[field].annotation))

    assert set(LOSS_NAMES) | {"sft"} == set(LOSSES)  # sft: vf-sft's loss
    assert choices(TrainerConfig, "schedule") == set(SCHEDULES)
    assert choices(GRPOLoss, "advantage") == set(ESTIMATORS)


def test_gradient_checkpointing_gives_the_same_gradient(tiny_model):
    import copy

    from verifiers.rl.algorithm.trainer import Trainer
    from verifiers.rl.configs.rl import TrainerConfig

    grads = []
    for checkpointing in (False, True):
        trainer = Trainer(
            copy.deepcopy(tiny_model), TrainerConfig(gradient_checkpointing=checkpointing)
        )
        assert trainer.model.is_activation_checkpointing == checkpointing
        trainer.gradients(random_samples())
        grads.append(torch.cat([p.grad.flatten() for p in trainer.model.parameters()]))
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


@cuda
def test_trainer_step_on_gpu_matches_cpu(tiny_model):
    import copy

    from verifiers.rl.algorithm.trainer import Trainer
    from verifiers.rl.configs.rl import TrainerConfig

    settings = TrainerConfig(lr=1e-2, packing=True, max_grad_norm=1e9)
    cpu, gpu = (
        Trainer(copy.deepcopy(tiny_model), settings),
        Trainer(copy.deepcopy(tiny_model).cuda(), settings),
    )
    cpu.train_step(random_samples())
    gpu.train_step(random_samples())
    for a, b in zip(cpu.model.parameters(), gpu.model.parameters(), strict=True):
        assert torch.allclose(a, b.cpu(), atol=1e-4)


@pytest.mark.slow
def test_fsdp2_data_parallel_step_equals_one_process(tmp_path):
    """Two CPU ranks (gloo) under torchrun: sharded FSDP2 training with uneven shards gives the
    same weights after a step, exported as one full state dict."""
    import json
    import subprocess

    worker = Path(__file__).parents[1] / "support" / "fsdp_worker.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [*torchrun(2, tmp_path / "logs"), str(worker), str(tmp_path / "w")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    report = json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][-1])
    assert report == {"weights_match": True, "grads_checked": 21}


def _checkpoint_worker(tmp_path: Path, ranks: int, *args: str) -> None:
    import subprocess
    import sys

    worker = str(Path(__file__).parents[1] / "support" / "fsdp_checkpoint_worker.py")
    command = (
        [*torchrun(ranks, tmp_path / "logs"), worker] if ranks > 1 else [sys.executable, worker]
    )
    result = subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "done at version 4" in result.stdout


@pytest.mark.slow
def test_fsdp2_checkpoint_resume_reproduces_the_run_and_reshards(tmp_path, left_by_the_dead):
    """Two FSDP2 ranks checkpoint at step 2 (sharded, via torch.distributed.checkpoint); resuming
    on two ranks gives the uninterrupted run's weights bit for bit, and the same checkpoint
    resumes in one process (resharded on load) to the same weights up to float summation order."""
    from safetensors.torch import load_file

    checkpoint = tmp_path / "ckpt"
    # what a run killed mid-save left (its writer gone), and a container's beside it (its own pids)
    killed_mid_save = tmp_path / left_by_the_dead(".ckpt-")
    another_container = tmp_path / left_by_the_dead(".ckpt-", elsewhere=True)
    for staging in (killed_mid_save, another_container):
        (staging / "dcp").mkdir(parents=True)
        (staging / "dcp" / "__0_0.distcp").write_bytes(b"partial")
    _checkpoint_worker(tmp_path, 2, "full", str(checkpoint), str(tmp_path / "full"))
    shards = sorted(p.name for p in (checkpoint / "dcp").iterdir())
    assert shards == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert sorted(p.name for p in checkpoint.glob("rng_rank*.pt")) == [
        "rng_rank0.pt",
        "rng_rank1.pt",
    ]
    assert list(tmp_path.glob(".ckpt-*")) == [another_container], "staging directory left behind"
    _checkpoint_worker(tmp_path, 2, "resume", str(checkpoint), str(tmp_path / "resumed"))
    _checkpoint_worker(tmp_path, 1, "resume", str(checkpoint), str(tmp_path / "single"))
    full = load_file(str(tmp_path / "full" / "model.safetensors"))
    resumed = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    single = load_file(str(tmp_path / "single" / "model.safetensors"))
    assert full.keys() == resumed.keys() == single.keys()
    for name, tensor in full.items():
        assert torch.equal(tensor, resumed[name]), name
        assert torch.allclose(tensor, single[name], atol=1e-6), name
    from support.toy import tiny_llama

    initial = tiny_llama().state_dict()
    assert all(not torch.equal(full[n], initial[n]) for n in full), "some weights never trained"


@pytest.mark.slow
def test_vf_rl_under_torchrun_with_two_training_processes(policy_dir, tmp_path):
    """vf-rl with FSDP2 over two ranks: trains, checkpoints (sharded), and resumes, the resumed
    part shipping weights over a gloo group (gathered from the shards on every update)."""
    import json
    import subprocess

    config = tmp_path / "rl.toml"
    config.write_text(
        f'model = "{policy_dir}"\nenv_id = "reverse-text"\noutput_dir = "{tmp_path / "out"}"\n'
        "steps = 2\ncheckpoint_every = 2\n"
        '[orchestrator]\nexamples_per_step = 2\nrollouts_per_example = 2\nmax_tokens = 8\n[trainer]\nlr = 1e-3\nautocast = "none"\n'
    )

    def vf_rl(*extra: str) -> subprocess.CompletedProcess:
        command = [*torchrun(2, tmp_path / "logs"), "-m", "verifiers.cli.rl"]
        return subprocess.run(
            [*command, "@", str(config), *extra],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )

    result = vf_rl()
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    checkpoint = tmp_path / "out" / "checkpoints" / "step_000002"
    assert sorted(p.name for p in (checkpoint / "dcp").glob("*.distcp")) == [
        "__0_0.distcp",
        "__1_0.distcp",
    ]
    result = vf_rl("--steps", "3", "--resume", "--inference.weight_transport", "gloo")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "resuming from" in result.stdout
    steps = [
        json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()
    ]
    assert [s["step"] for s in steps] == [0, 1, 2]
    assert [s["policy_version"] for s in steps] == [1, 2, 3]
    assert [s["served_version"] for s in steps] == [1, 2, 3]


def _saved_checkpoint(tmp_path):
    """A checkpoint's files as save_checkpoint writes them, for a small state."""
    import warnings

    import torch.distributed.checkpoint as dcp

    directory = tmp_path / "step_000001"
    (directory / "dcp").mkdir(parents=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        dcp.save({"model": {"w": torch.ones(3)}}, checkpoint_id=str(directory / "dcp"))
    torch.save(
        {"scheduler": {"last_epoch": 1, "base_lrs": [0.1]}, "version": 1, "step": 1},
        directory / "trainer.pt",
    )
    return directory


class _RunsCode:
    def __reduce__(self):
        import os

        return (os.system, ("touch PWNED",))


def test_a_checkpoint_is_read_as_data_never_as_code(tmp_path, monkeypatch):
    """--resume read trainer.pt and rng_rank*.pt with weights_only=False and dcp/.metadata with
    pickle.load: a checkpoint from elsewhere ran code as the user, and the resume succeeded."""
    import pickle

    from verifiers.rl.run.checkpoint import UnsafeCheckpointError, _data_only, check_checkpoint

    monkeypatch.chdir(tmp_path)
    directory = _saved_checkpoint(tmp_path)
    check_checkpoint(directory)  # the genuine article passes
    assert _data_only(directory / "trainer.pt")["version"] == 1
    genuine = (directory / "dcp" / ".metadata").read_bytes()
    (directory / "dcp" / ".metadata").write_bytes(pickle.dumps(_RunsCode()))
    with pytest.raises(UnsafeCheckpointError, match=r"names (posix|os)\.system"):
        check_checkpoint(directory)
    (directory / "dcp" / ".metadata").write_bytes(genuine)
    torch.save({"scheduler": _RunsCode()}, directory / "trainer.pt")
    with pytest.raises(UnsafeCheckpointError, match="holds more than data"):
        _data_only(directory / "trainer.pt")
    assert not (tmp_path / "PWNED").exists()  # nothing ran
    directory.chmod(0o777)  # others may swap its files after the check
    with pytest.raises(UnsafeCheckpointError, match="others may write it"):
        check_checkpoint(directory)
