"""The trainer: losses against hand-computed gradients, batching equivalences, the async loop's
staleness bound, level-0 equivalence with a synchronous loop, resume, failure, and learning."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

SECRET = "test-weights-secret"  # what the trainer would make at launch (weight_access)
torch = pytest.importorskip("torch")

from verifiers.rl.advantages import ESTIMATORS, group_mean, leave_one_out  # noqa: E402
from verifiers.rl.batching import (  # noqa: E402
    MissingTokensError,
    samples_from_state,
)
from verifiers.rl.losses import LOSSES  # noqa: E402

# The losses against their papers' formulas, packed and padded under each attention
# implementation, and the safeguards: tests/rl/test_rl_losses.py.


# --- advantages -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_group_advantages_sum_to_zero(name):
    for rewards in ([1.0, 0.0, 0.0, 1.0], [0.3, 0.9, 0.1], [2.0, 2.0]):
        assert sum(ESTIMATORS[name](rewards)) == pytest.approx(0.0, abs=1e-9)


def test_advantage_values():
    assert group_mean([1.0, 0.0]) == [0.5, -0.5]
    # the sample std (n - 1), as DeepSeekMath/TRL: std([1, 0]) = 0.7071, plus epsilon 1e-4
    assert group_mean([1.0, 0.0], scale=True) == pytest.approx([0.7070, -0.7070], abs=1e-4)
    assert group_mean([0.5, 0.5, 0.5], scale=True) == [0.0, 0.0, 0.0]  # uniform: no signal
    assert leave_one_out([1.0, 0.0, 0.0]) == [1.0, -0.5, -0.5]


# --- samples and batches ------------------------------------------------------------------------------


def step(prompt_ids, completion_ids, logprob=-0.5):
    return {
        "tokens": {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "completion_logprobs": [logprob] * len(completion_ids),
        }
    }


def test_multi_turn_rollout_becomes_one_masked_sample():
    state = {"reward": 1.0, "trajectory": [step([1, 2], [3, 4]), step([1, 2, 3, 4, 9, 9], [5])]}
    (sample,) = samples_from_state(state, advantage=0.5, policy_version=2)
    assert sample.input_ids == [1, 2, 3, 4, 9, 9, 5]
    assert sample.loss_mask == [0, 0, 1, 1, 0, 0, 1]  # environment tokens (9, 9) are never trained
    assert sample.old_logprobs == [0, 0, -0.5, -0.5, 0, 0, -0.5] and sample.policy_version == 2


def test_an_empty_reply_is_an_error_on_the_rollout_and_still_a_training_sample():
    """The policy chose to say nothing (one end-of-sequence token): the rollout carries the
    error, and the trainer still learns from those tokens with the rollout's reward."""
    import verifiers as vf
    from verifiers.errors import EmptyModelResponseError, ModelConnectionError
    from verifiers.rl.orchestrator import _trainable_error

    env = vf.SingleTurnEnv(dataset=[{"question": "q", "answer": "a"}], rubric=vf.Rubric())
    state = {
        "responses": [],
        "trajectory": [],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0},
    }
    reply = {
        "prompt_token_ids": [1, 2, 3],
        "choices": [
            {
                "message": {"role": "assistant", "content": ""},
                "finish_reason": "stop",
                "token_ids": [0],
                "logprobs": {"content": [{"token": "<eos>", "logprob": -0.25}]},
            }
        ],
    }
    with pytest.raises(EmptyModelResponseError):
        env.record_model_response(state, [{"role": "user", "content": "q"}], reply)
    state.update(reward=0.0, error=EmptyModelResponseError("empty"))
    assert _trainable_error(state)
    (sample,) = samples_from_state(state, advantage=-0.5, policy_version=0)
    assert sample.input_ids == [1, 2, 3, 0] and sample.loss_mask == [0, 0, 0, 1]
    assert sample.old_logprobs == [0, 0, 0, -0.25] and sample.advantage == -0.5
    assert not _trainable_error({**state, "error": ModelConnectionError("down")})


def test_re_rendered_history_starts_a_new_sample():
    state = {"reward": 0.0, "trajectory": [step([1, 2], [3, 4]), step([1, 2, 7, 9], [5])]}
    assert [s.input_ids for s in samples_from_state(state, 0.0, 0)] == [
        [1, 2, 3, 4],
        [1, 2, 7, 9, 5],
    ]
    with pytest.raises(MissingTokensError, match="return_token_ids"):
        samples_from_state({"trajectory": [{"tokens": None}]}, 0.0, 0)


@pytest.fixture(scope="module")
def tiny_model():
    from verifiers.rl.toy import tiny_llama

    return tiny_llama()


def random_samples(n=5):
    from verifiers.rl.toy import random_samples as make

    return make(n)


def test_lr_schedules_warm_up_then_decay_to_the_floor():
    from verifiers.rl.schedules import lr_factor

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

    from verifiers.rl.config import TrainerConfig
    from verifiers.rl.trainer import Trainer

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

    from verifiers.rl.config import LOSS_NAMES, GRPOLoss, TrainerConfig
    from verifiers.rl.schedules import SCHEDULES

    def choices(model, field):
        return set(typing.get_args(model.model_fields[field].annotation))

    assert set(LOSS_NAMES) | {"sft"} == set(LOSSES)  # sft: vf-sft's loss
    assert choices(TrainerConfig, "schedule") == set(SCHEDULES)
    assert choices(GRPOLoss, "advantage") == set(ESTIMATORS)


def test_gradient_checkpointing_gives_the_same_gradient(tiny_model):
    import copy

    from verifiers.rl.config import TrainerConfig
    from verifiers.rl.trainer import Trainer

    grads = []
    for checkpointing in (False, True):
        trainer = Trainer(
            copy.deepcopy(tiny_model), TrainerConfig(gradient_checkpointing=checkpointing)
        )
        assert trainer.model.is_activation_checkpointing == checkpointing
        trainer.gradients(random_samples())
        grads.append(torch.cat([p.grad.flatten() for p in trainer.model.parameters()]))
    assert torch.allclose(grads[0], grads[1], atol=1e-6)


# --- the loop against a real inference server ------------------------------------------------------------


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    from verifiers.rl.toy import make_tiny_policy

    return make_tiny_policy(tmp_path_factory.mktemp("policy"))


def letter_orchestrator(server, cls, **overrides):
    """The letter task's orchestrator against ``server``: one recipe for every loop test, so the
    library loop and a hand-written one see the same rollouts."""
    from verifiers.clients import OpenAICompatibleClient
    from verifiers.rl.toy import letter_env

    # every group trains (a random tiny policy often scores 0 on a whole group): the loop tests
    # need a trained step every step
    settings = dict(
        examples_per_step=4,
        rollouts_per_example=4,
        max_tokens=6,
        seed=3,
        filter_zero_advantage=False,
    )
    return cls(
        letter_env(),
        OpenAICompatibleClient(server.base_url),
        "policy",
        **{**settings, **overrides},
    )


def run_loop(
    policy_dir,
    tmp,
    *,
    steps,
    lag,
    concurrent=1,
    lr=5e-3,
    checkpoint_every=0,
    start_from=None,
    orchestrator_cls=None,
    on_server=None,
    transport="filesystem",
    probe=None,
    temperature=1.0,
    trainer_settings=None,
    decode=None,
):
    from transformers import AutoModelForCausalLM

    from verifiers.processes.server import start_server
    from verifiers.rl.config import TrainerConfig
    from verifiers.rl.loop import LoopSettings, train
    from verifiers.rl.orchestrator import Orchestrator
    from verifiers.rl.trainer import Trainer
    from verifiers.weights.transport import BroadcastTransport, FilesystemTransport

    server = start_server(
        str(policy_dir),
        log_path=tmp / "serve.log",
        extra_args=["--dtype", "float32", "--served-model-name", "policy"],
        env_overrides={"OMP_WAIT_POLICY": "PASSIVE"},
        weights_secret=SECRET,
        trusted_weights_dirs=[tmp],
    )
    if on_server is not None:
        on_server(server)
    try:
        trainer = Trainer(
            AutoModelForCausalLM.from_pretrained(policy_dir),
            TrainerConfig(lr=lr, **(trainer_settings or {})),
            temperature=temperature,
        )
        start = 0
        alive = lambda: None if server.process.poll() is None else "inference server died"  # noqa: E731
        weights = (
            FilesystemTransport(server.base_url, tmp / "weights", alive, secret=SECRET)
            if transport == "filesystem"
            else BroadcastTransport(server.base_url, alive, backend=transport, secret=SECRET)
        )
        if start_from is not None:
            start = trainer.load_checkpoint(start_from)["step"]
            weights.push(trainer)
        orchestrator = letter_orchestrator(
            server,
            orchestrator_cls or Orchestrator,
            max_concurrent=concurrent,
            temperature=temperature,
            health=alive,
        )
        orchestrator.trainer = trainer  # for tests that watch the trainer from the orchestrator
        history = train(
            orchestrator,
            trainer,
            weights,
            LoopSettings(
                steps, lag, checkpoint_every, tmp / "run", keep_checkpoints=0, decode=decode
            ),
            start_step=start,
        )
        if probe is not None:
            probe(server)
        weights.close()
        return history, trainer
    finally:
        server.stop()


def test_no_trained_sample_exceeds_the_staleness_bound(policy_dir, tmp_path):
    from verifiers.rl.orchestrator import Orchestrator

    class Laggy(Orchestrator):
        """Half of each batch claims to come from a policy 5 versions old."""

        async def generate(self, step):
            batch = await super().generate(step)
            for sample in batch.samples[::2]:
                sample.policy_version -= 5
            return batch

    history, _ = run_loop(
        policy_dir, tmp_path, steps=4, lag=1, concurrent=8, orchestrator_cls=Laggy
    )
    trained = [h for h in history if h["groups_trained"]]  # a step may draw no signal at all
    assert trained and all(h["stale_dropped"] > 0 for h in trained)
    normal, _ = run_loop(policy_dir, tmp_path / "b", steps=4, lag=1, concurrent=8)
    assert all(h["max_lag"] <= 1 and h["stale_dropped"] == 0 for h in normal)


def test_level_zero_matches_a_synchronous_loop_bit_for_bit(policy_dir, tmp_path):
    import asyncio

    from transformers import AutoModelForCausalLM

    from verifiers.processes.server import start_server
    from verifiers.rl.config import TrainerConfig
    from verifiers.rl.orchestrator import Orchestrator
    from verifiers.rl.trainer import Trainer
    from verifiers.weights.transport import FilesystemTransport

    _, async_trainer = run_loop(policy_dir, tmp_path / "a", steps=3, lag=0)
    server = start_server(
        str(policy_dir),
        log_path=tmp_path / "s.log",
        extra_args=["--dtype", "float32", "--served-model-name", "policy"],
        weights_secret=SECRET,
        trusted_weights_dirs=[tmp_path],
    )
    try:
        trainer = Trainer(AutoModelForCausalLM.from_pretrained(policy_dir), TrainerConfig(lr=5e-3))
        orchestrator = letter_orchestrator(server, Orchestrator, max_concurrent=1)
        weights = FilesystemTransport(server.base_url, tmp_path / "w", secret=SECRET)
        for step_index in range(3):  # the plainest loop there is
            batch = asyncio.run(orchestrator.generate(step_index))
            trainer.train_step(batch.samples)
            weights.push(trainer)
    finally:
        server.stop()
    for a, b in zip(async_trainer.model.parameters(), trainer.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_resume_from_a_checkpoint_reproduces_the_uninterrupted_run(policy_dir, tmp_path):
    full_history, full = run_loop(policy_dir, tmp_path / "full", steps=4, lag=0, checkpoint_every=2)
    checkpoint = tmp_path / "full" / "run" / "checkpoints" / "step_000002"
    assert checkpoint.exists()
    resumed_history, resumed = run_loop(
        policy_dir, tmp_path / "resumed", steps=4, lag=0, start_from=checkpoint
    )
    assert [h["step"] for h in resumed_history] == [2, 3]
    assert [h["reward"] for h in resumed_history] == [h["reward"] for h in full_history[2:]]
    for a, b in zip(full.model.parameters(), resumed.model.parameters(), strict=True):
        assert torch.equal(a, b)


def test_generation_runs_up_to_max_off_policy_steps_ahead(policy_dir, tmp_path):
    """With a bound of 2, the batch for step n starts generating while step n - 2 trains (from
    policy version n - 2) and nothing trained is more than 2 versions old."""
    from verifiers.rl.orchestrator import Orchestrator

    started: dict[int, int] = {}

    class Recording(Orchestrator):
        async def generate(self, step):
            started[step] = self.trainer.version  # the policy the trainer had at that moment
            return await super().generate(step)

    history, _ = run_loop(policy_dir, tmp_path, steps=5, lag=2, orchestrator_cls=Recording)
    assert started == {0: 0, 1: 0, 2: 0, 3: 1, 4: 2}
    assert all(h["max_lag"] <= 2 for h in history)
    # every rollout is trained (empty replies and no-advantage groups included: the loop tests
    # keep them) or dropped as stale
    assert sum(h["samples"] + h["stale_dropped"] for h in history) == 5 * 16


def test_trainer_logprobs_are_of_the_sampling_distribution_at_any_temperature(policy_dir, tmp_path):
    """At temperature 0.6 the server reports logprobs of softmax(logits / 0.6); the trainer must
    compute the same, or every importance ratio is off before any training happens."""
    history, _ = run_loop(policy_dir, tmp_path, steps=1, lag=0, temperature=0.6)
    assert abs(history[0]["mean_ratio"] - 1) < 1e-4
    assert abs(history[0]["mismatch_kl"]) < 1e-5


def _probe_logprobs(into: dict):
    """What the server's current weights say about a fixed prompt: exact float32 logprobs."""

    def probe(server) -> None:
        import httpx

        body = {
            "model": "policy",
            "prompt": "AAB",
            "max_tokens": 4,
            "temperature": 0,
            "logprobs": 1,
            "ignore_eos": True,
        }
        reply = httpx.post(f"{server.base_url}/completions", json=body, timeout=60).json()
        into["logprobs"] = reply["choices"][0]["logprobs"]["token_logprobs"]
        into["weights"] = httpx.get(f"{server.base_url}/weights").json()

    return probe


def test_broadcast_transport_serves_exactly_the_trained_weights(policy_dir, tmp_path):
    """Weights over a gloo process group (no disk) reach the server bit for bit: the same run
    with the filesystem transport gives the same rollouts, the same trained weights and the same
    logprobs from the server afterwards."""
    by_disk, by_broadcast = {}, {}
    disk_history, disk = run_loop(
        policy_dir, tmp_path / "disk", steps=3, lag=0, probe=_probe_logprobs(by_disk)
    )
    group_history, group = run_loop(
        policy_dir,
        tmp_path / "group",
        steps=3,
        lag=0,
        transport="gloo",
        probe=_probe_logprobs(by_broadcast),
    )
    assert [h["reward"] for h in group_history] == [h["reward"] for h in disk_history]
    assert [h["served_version"] for h in group_history] == [1, 2, 3]
    for a, b in zip(disk.model.parameters(), group.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert by_broadcast["logprobs"] == by_disk["logprobs"]
    assert by_broadcast["weights"] == {
        "policy_version": 3,
        "path": "broadcast",
        "inference_ranks": 1,
    }
    assert not (tmp_path / "group" / "weights").exists()  # nothing went through the disk


def test_lora_trains_only_the_adapters_and_the_server_serves_exactly_them(policy_dir, tmp_path):
    """LoRA through peft: the base weights do not move, only adapter tensors reach the server
    (peft's layout), and vf-serve merges them into its base so exactly: the next step's rollouts
    have trainer/inference ratio 1."""
    from transformers import AutoModelForCausalLM

    from verifiers.weights.files import read_safetensors

    start = AutoModelForCausalLM.from_pretrained(policy_dir).state_dict()
    lora = {"lora": {"rank": 4, "alpha": 8}, "kl_beta": 0.1}
    history, trainer = run_loop(
        policy_dir, tmp_path, steps=3, lag=0, lr=2e-2, trainer_settings=lora
    )
    changed, fixed = [], []
    for name, value in trainer.model.named_parameters():
        plain = name.removeprefix("base_model.model.").replace(".base_layer", "")
        if "lora_" in name:
            changed.append(name)
        else:
            assert torch.equal(value, start[plain]), f"{name} moved"
            fixed.append(name)
    assert (
        changed
        and fixed
        and all(p.requires_grad == ("lora_" in n) for n, p in trainer.model.named_parameters())
    )
    pushed = read_safetensors(tmp_path / "weights" / "adapter")
    assert pushed and all(".lora_" in k for k in pushed)
    assert not list((tmp_path / "weights").glob("*.safetensors"))  # no full weights written
    assert all(abs(h["mean_ratio"] - 1) < 1e-4 for h in history[1:])  # served = trained
    assert all(h["mismatch_kl"] < 1e-6 for h in history[1:])
    assert history[-1]["ref_kl"] > 0  # the reference is the base with the adapter off
    merged = trainer.merged_state()
    moved = [k for k, v in merged.items() if not torch.equal(v, start[k])]
    assert moved and all(k.endswith("proj.weight") for k in moved)


def test_broadcast_refuses_weights_that_do_not_fit_the_served_model(policy_dir, tmp_path):
    import httpx
    from transformers import AutoModelForCausalLM

    from verifiers.processes.server import start_server
    from verifiers.rl.config import TrainerConfig
    from verifiers.rl.toy import tiny_llama
    from verifiers.rl.trainer import Trainer
    from verifiers.weights.errors import InferenceServerError
    from verifiers.weights.transport import BroadcastTransport

    server = start_server(str(policy_dir), log_path=tmp_path / "s.log", weights_secret=SECRET)
    try:
        wrong = Trainer(tiny_llama(vocab_size=64), TrainerConfig())  # not the served model
        transport = BroadcastTransport(server.base_url, timeout_s=30, secret=SECRET)
        with pytest.raises(InferenceServerError, match=r"do not fit the served model.*shape"):
            transport.push(wrong)
        assert transport.group is None
        spec = {"name": "x", "dtype": "float32", "shape": [1]}
        too_many = {"host": "127.0.0.1", "port": 1, "world_size": 3, "tensors": [spec]}
        reply = httpx.post(
            f"{server.base_url}/weights/broadcast/init",
            json=too_many,
            headers={"X-VF-Weights-Secret": SECRET},
        )
        # refused, rather than joining a group whose third rank never comes
        assert reply.status_code == 400 and "world_size 2" in reply.json()["error"]["message"]
        # the refusals left the server usable: the right weights still go through
        right = Trainer(AutoModelForCausalLM.from_pretrained(policy_dir), TrainerConfig())
        right.version = 7
        assert transport.push(right) == 7
        transport.close()
        # a restarted trainer sets up a new group; the server drops the old one for it
        right.version = 8
        restarted = BroadcastTransport(server.base_url, timeout_s=30, secret=SECRET)
        assert restarted.push(right) == 8
        restarted.close()
    finally:
        server.stop()


def test_a_server_killed_between_broadcasts_is_reported_not_waited_for(policy_dir, tmp_path):
    """No health callback: the transport itself must notice the dead peer, well before the
    group's 60 s timeout."""
    import time

    from transformers import AutoModelForCausalLM

    from verifiers.processes.server import start_server
    from verifiers.rl.config import TrainerConfig
    from verifiers.rl.trainer import Trainer
    from verifiers.weights.errors import InferenceServerError
    from verifiers.weights.transport import BroadcastTransport

    server = start_server(str(policy_dir), log_path=tmp_path / "s.log", weights_secret=SECRET)
    try:
        trainer = Trainer(AutoModelForCausalLM.from_pretrained(policy_dir), TrainerConfig())
        transport = BroadcastTransport(server.base_url, timeout_s=60, secret=SECRET)
        assert transport.push(trainer) == 0
        server.process.kill()
        server.process.wait()
        start = time.monotonic()
        with pytest.raises(InferenceServerError):
            transport.push(trainer)
        assert time.monotonic() - start < 10
        assert transport.group is None
    finally:
        server.stop()


def test_a_killed_inference_server_is_detected_and_reported(policy_dir, tmp_path):
    from verifiers.rl.orchestrator import Orchestrator
    from verifiers.weights.errors import InferenceServerError

    class Killer(Orchestrator):
        async def generate(self, step):
            if step == 1:
                os.kill(self.server_pid, signal.SIGKILL)
            return await super().generate(step)

    def remember(server):
        Killer.server_pid = server.process.pid

    with pytest.raises(
        InferenceServerError, match=r"(inference server died|stopped answering|did not take)"
    ):
        run_loop(policy_dir, tmp_path, steps=3, lag=0, orchestrator_cls=Killer, on_server=remember)


@pytest.mark.slow
def test_a_tiny_model_learns_to_say_the_letter(policy_dir, tmp_path):
    history, _ = run_loop(policy_dir, tmp_path, steps=30, lag=1, concurrent=16)
    first = sum(h["reward"] for h in history[:5]) / 5
    last = sum(h["reward"] for h in history[-5:]) / 5
    assert last > 0.5 and last > 5 * first, (first, last)


@pytest.mark.slow
def test_vf_rl_cli_runs_checkpoints_plots_and_resumes(policy_dir, tmp_path):
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
        [sys.executable, "-m", "verifiers.rl.cli", "@", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    out = tmp_path / "out"
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [0, 1]
    # the environment (loaded by id) ran in worker processes, as vf-eval runs it
    assert all(r["env_workers"] >= 1 and r["env_worker_restarts"] == 0 for r in records)
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
    again = subprocess.run(  # a second run into the same dir would mix the two
        [sys.executable, "-m", "verifiers.rl.cli", "@", str(config)], capture_output=True, text=True
    )
    assert again.returncode == 2 and "already holds a run" in again.stdout
    nothing = subprocess.run(
        [
            sys.executable,
            "-m",
            "verifiers.rl.cli",
            "@",
            str(config),
            "--resume",
            "--output_dir",
            str(tmp_path / "empty"),
        ],
        capture_output=True,
        text=True,
    )
    assert nothing.returncode == 2 and "--resume: no checkpoint" in nothing.stdout
    # resume from step 1: the records of step 1 are redone, not appended after it
    shutil.rmtree(out / "checkpoints" / "step_000002")
    resumed = subprocess.run(  # and the rest of the run with weights over a gloo group
        [
            *(sys.executable, "-m", "verifiers.rl.cli", "@", str(config)),
            *("--steps", "3", "--resume", "--inference.weight_transport", "gloo"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "resuming from" in resumed.stdout and "(step 1)" in resumed.stdout
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
    nccl = subprocess.run(
        [
            *(sys.executable, "-m", "verifiers.rl.cli", "@", str(config)),
            *("--inference.weight_transport", "nccl", "--output_dir", str(tmp_path / "nccl")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert nccl.returncode == 2 and "two different GPUs" in nccl.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "verifiers.rl.cli", "@", str(config), "--steps", "0"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "invalid config" in bad.stderr
    misspelt = subprocess.run(
        [sys.executable, "-m", "verifiers.rl.cli", "@", str(config), "--trainer.lrr", "1e-3"],
        capture_output=True,
        text=True,
    )
    assert misspelt.returncode == 2 and "trainer.lrr" in misspelt.stderr
    for flag, value, message in (
        ("--env_id", "nope-env", "no environment 'nope-env' is installed"),
        ("--model", str(tmp_path / "nowhere"), "is not a local directory"),
    ):
        missing = subprocess.run(
            [
                *(sys.executable, "-m", "verifiers.rl.cli", "@", str(config), flag, value),
                "--output_dir",
                str(tmp_path / "x"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert missing.returncode == 2 and message in missing.stdout, missing.stdout
        assert "Traceback" not in missing.stdout + missing.stderr


def test_model_limits_are_checked_before_vllm_starts(policy_dir):
    """vLLM refuses a context longer than the model's positions, and one GPU shared by the
    trainer and a vLLM that reserves most of it runs out of memory: vf-rl says so first."""
    from verifiers.rl.cli import RLConfig, model_problem, parameter_count

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
    from verifiers.rl.cli import RLConfig, device_problem, trainer_device

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


def test_fsdp2_data_parallel_step_equals_one_process(tmp_path):
    """Two CPU ranks (gloo) under torchrun: sharded FSDP2 training with uneven shards gives the
    same weights after a step, exported as one full state dict."""
    import json
    import shutil
    import subprocess
    import sys

    torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
    worker = Path(__file__).with_name("fsdp_worker.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(
        [torchrun, "--standalone", "--nproc_per_node", "2", str(worker), str(tmp_path / "w")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    report = json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][-1])
    assert report == {"weights_match": True, "grads_checked": 21}


def _checkpoint_worker(tmp_path: Path, ranks: int, *args: str) -> None:
    import shutil
    import subprocess
    import sys

    worker = str(Path(__file__).with_name("fsdp_checkpoint_worker.py"))
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
    command = (
        [torchrun, "--standalone", "--nproc_per_node", str(ranks), worker]
        if ranks > 1
        else [sys.executable, worker]
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


def test_fsdp2_checkpoint_resume_reproduces_the_run_and_reshards(tmp_path):
    """Two FSDP2 ranks checkpoint at step 2 (sharded, via torch.distributed.checkpoint); resuming
    on two ranks gives the uninterrupted run's weights bit for bit, and the same checkpoint
    resumes in one process (resharded on load) to the same weights up to float summation order."""
    from safetensors.torch import load_file

    checkpoint = tmp_path / "ckpt"
    _checkpoint_worker(tmp_path, 2, "full", str(checkpoint), str(tmp_path / "full"))
    shards = sorted(p.name for p in (checkpoint / "dcp").iterdir())
    assert shards == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert sorted(p.name for p in checkpoint.glob("rng_rank*.pt")) == [
        "rng_rank0.pt",
        "rng_rank1.pt",
    ]
    assert not list(tmp_path.glob(".ckpt-*")), "staging directory left behind"
    _checkpoint_worker(tmp_path, 2, "resume", str(checkpoint), str(tmp_path / "resumed"))
    _checkpoint_worker(tmp_path, 1, "resume", str(checkpoint), str(tmp_path / "single"))
    full = load_file(str(tmp_path / "full" / "model.safetensors"))
    resumed = load_file(str(tmp_path / "resumed" / "model.safetensors"))
    single = load_file(str(tmp_path / "single" / "model.safetensors"))
    assert full.keys() == resumed.keys() == single.keys()
    for name, tensor in full.items():
        assert torch.equal(tensor, resumed[name]), name
        assert torch.allclose(tensor, single[name], atol=1e-6), name
    from verifiers.rl.toy import tiny_llama

    initial = tiny_llama().state_dict()
    assert all(not torch.equal(full[n], initial[n]) for n in full), "some weights never trained"


@pytest.mark.slow
def test_vf_rl_under_torchrun_with_two_training_processes(policy_dir, tmp_path):
    """vf-rl with FSDP2 over two ranks: trains, checkpoints (sharded), and resumes, the resumed
    part shipping weights over a gloo group (gathered from the shards on every update)."""
    import json
    import shutil
    import subprocess
    import sys

    config = tmp_path / "rl.toml"
    config.write_text(
        f'model = "{policy_dir}"\nenv_id = "reverse-text"\noutput_dir = "{tmp_path / "out"}"\n'
        "steps = 2\ncheckpoint_every = 2\n"
        '[orchestrator]\nexamples_per_step = 2\nrollouts_per_example = 2\nmax_tokens = 8\n[trainer]\nlr = 1e-3\nautocast = "none"\n'
    )
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")

    def vf_rl(*extra: str) -> subprocess.CompletedProcess:
        command = [torchrun, "--standalone", "--nproc_per_node", "2", "-m", "verifiers.rl.cli"]
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


cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA GPU (run scripts/gpu_check.sh on a GPU machine)",
)


@cuda
def test_trainer_step_on_gpu_matches_cpu(tiny_model):
    import copy

    from verifiers.rl.config import TrainerConfig
    from verifiers.rl.trainer import Trainer

    settings = TrainerConfig(lr=1e-2, packing=True, max_grad_norm=1e9)
    cpu, gpu = (
        Trainer(copy.deepcopy(tiny_model), settings),
        Trainer(copy.deepcopy(tiny_model).cuda(), settings),
    )
    cpu.train_step(random_samples())
    gpu.train_step(random_samples())
    for a, b in zip(cpu.model.parameters(), gpu.model.parameters(), strict=True):
        assert torch.allclose(a, b.cpu(), atol=1e-4)


@cuda
def test_engine_generates_on_gpu(policy_dir):
    import threading

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verifiers.serve.engine import Engine, SamplingParams, Sequence

    engine = Engine(
        AutoModelForCausalLM.from_pretrained(policy_dir).cuda(),
        AutoTokenizer.from_pretrained(policy_dir),
    )
    done = threading.Event()
    seq = engine.submit(
        Sequence(
            [5, 6, 7],
            SamplingParams(max_tokens=8, temperature=0, ignore_eos=True),
            lambda k, p: done.set() if k == "done" else None,
        )
    )
    assert done.wait(60)
    engine.shutdown()
    assert len(seq.out_ids) == 8


def test_a_stuck_broadcast_init_cannot_lock_the_trainer_out(policy_dir, tmp_path):
    """An init whose trainer never joins (a dead or hostile one) is replaced by the next init."""
    import httpx
    from transformers import AutoModelForCausalLM

    from verifiers.processes.server import free_port, start_server
    from verifiers.rl.config import TrainerConfig
    from verifiers.rl.trainer import Trainer
    from verifiers.weights.transport import BroadcastTransport

    server = start_server(str(policy_dir), log_path=tmp_path / "s.log", weights_secret=SECRET)
    try:
        trainer = Trainer(AutoModelForCausalLM.from_pretrained(policy_dir), TrainerConfig())
        specs = [
            {"name": n, "dtype": "float32", "shape": list(p.shape)}
            for n, p in trainer.model.state_dict().items()
        ]
        stuck = {"host": "127.0.0.1", "port": free_port(), "timeout_s": 600, "tensors": specs}
        reply = httpx.post(
            f"{server.base_url}/weights/broadcast/init",
            json=stuck,
            headers={"X-VF-Weights-Secret": SECRET},
            timeout=30,
        )
        assert reply.status_code == 202  # joining a group nobody else will join
        trainer.version = 3
        transport = BroadcastTransport(server.base_url, timeout_s=60, secret=SECRET)
        assert transport.push(trainer) == 3  # the newer init won
        transport.close()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["@", "/nonexistent.toml"], "no config file /nonexistent.toml"),
        (["@", "{bad}"], "is not valid TOML"),
        (["--steps"], "expected '--key value'"),
    ],
)
def test_vf_rl_config_mistakes_are_one_line_and_exit_2(tmp_path, argv, message):
    import subprocess
    import sys

    bad = tmp_path / "bad.toml"
    bad.write_text("steps = = 3\n")
    argv = [a.replace("{bad}", str(bad)) for a in argv]
    result = subprocess.run(
        [sys.executable, "-m", "verifiers.rl.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and message in result.stderr
    assert "Traceback" not in result.stderr


def test_only_the_newest_checkpoints_are_kept(tmp_path):
    from verifiers.rl.command import latest_checkpoint, prune_checkpoints

    for step in (1, 2, 3, 4):
        (tmp_path / "checkpoints" / f"step_{step:06d}").mkdir(parents=True)
    removed = prune_checkpoints(tmp_path / "checkpoints", keep=2)
    assert [p.name for p in removed] == ["step_000001", "step_000002"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "step_000003",
        "step_000004",
    ]
    assert latest_checkpoint(tmp_path).name == "step_000004"
    assert prune_checkpoints(tmp_path / "checkpoints", keep=0) == []  # 0 keeps every one


# --- batch forming: baselines, overlong, zero-advantage groups, dynamic sampling ------------------


def scripted_batch(rows, **orchestrator):
    """One step's Batch for a letter task whose replies are scripted per example (a real
    environment against a loopback OpenAI-compatible server)."""
    import asyncio
    import collections
    import re

    import verifiers as vf
    from verifiers.clients import OpenAICompatibleClient
    from verifiers.rl.orchestrator import Orchestrator
    from verifiers.testing import ModelServer, Reply

    script = {  # per example kind: the four rollouts' replies
        "all": [Reply("AAAA")] * 4,  # solved by every rollout: no advantage
        "none": [Reply("bbbb")] * 4,  # solved by none: no advantage
        "long": [
            Reply("AAAA"),
            Reply("bbbb"),
            Reply("AAbb"),
            Reply("AAAA", finish_reason="length"),
        ],
        "error": [Reply("AAAA"), Reply("bbbb"), Reply("AAAA"), Reply(status=400, error="bad")],
    }
    seen = collections.Counter()

    def handler(request):
        question = request["messages"][-1]["content"]
        kind = re.search(r"\[(\w+)\]", question).group(1)
        seen[question] += 1
        return script[kind][(seen[question] - 1) % 4]  # a refill may draw it again

    def letter_fraction(completion, **kwargs) -> float:
        text = completion[-1]["content"] if completion else ""
        return text.count("A") / max(len(text), 1)

    env = vf.SingleTurnEnv(
        dataset=[
            {"question": f"Say A [{kind}] ({i})", "answer": "A"} for i, kind in enumerate(rows)
        ],
        rubric=vf.Rubric(funcs=[letter_fraction]),
    )
    with ModelServer(handler) as server:
        settings = dict(examples_per_step=4, rollouts_per_example=4, max_tokens=4, max_concurrent=1)
        advantage = orchestrator.pop("advantage", None)
        orch = Orchestrator(
            env,
            OpenAICompatibleClient(server.base_url),
            "m",
            advantage=advantage,
            **{**settings, **orchestrator},
        )

        async def one_step():
            try:
                return await orch.generate(0)
            finally:
                await orch.client.aclose()

        return asyncio.run(one_step())


def by_reward(batch):
    return sorted((round(s.reward, 3), round(s.advantage, 4)) for s in batch.samples)


def test_groups_with_no_advantage_are_left_out_and_counted():
    batch = scripted_batch(["all", "none", "long", "long"])
    assert batch.stats["zero_advantage_groups"] == 2 and batch.stats["groups_trained"] == 2
    assert batch.stats["solve_all"] == 0.25 and batch.stats["solve_none"] == 0.25
    assert len(batch.samples) == 8  # the two "long" groups only
    kept = scripted_batch(["all", "none", "long", "long"], filter_zero_advantage=False)
    assert len(kept.samples) == 16 and sum(s.advantage == 0 for s in kept.samples) == 8


def test_a_failed_rollout_leaves_the_baseline_instead_of_counting_as_zero():
    import statistics

    batch = scripted_batch(["error", "error", "error", "error"])
    assert batch.errors == 4 and len(batch.samples) == 12
    rewards = [1.0, 0.0, 1.0]  # the three that answered; not [1, 0, 1, 0]
    mean, std = statistics.fmean(rewards), statistics.stdev(rewards)
    expected = sorted((r, round((r - mean) / (std + 1e-4), 4)) for r in rewards)
    assert by_reward(batch) == sorted(expected * 4)


def test_truncated_completions_are_kept_masked_or_penalized():
    rewards = [1.0, 0.0, 0.5, 1.0]  # the fourth hit max_tokens
    keep = scripted_batch(["long"] * 4)
    assert keep.stats["truncated_fraction"] == 0.25 and len(keep.samples) == 16
    mask = scripted_batch(["long"] * 4, overlong="mask")
    assert len(mask.samples) == 12  # the truncated one trains nothing, but is in the baseline
    from verifiers.rl.advantages import group_mean

    in_baseline = dict(zip(rewards[:3], group_mean(rewards, scale=True)[:3], strict=True))
    assert all(s.advantage == pytest.approx(in_baseline[round(s.reward, 3)]) for s in mask.samples)
    # the soft penalty starts at max_tokens - buffer = 6: the 4-token replies keep their reward
    penalized = scripted_batch(
        ["long"] * 4, overlong="penalize", overlong_penalty=1.0, max_tokens=8, overlong_buffer=2
    )
    lowest = min(s.advantage for s in penalized.samples)
    # the truncated "AAAA" scores 1 - 1 = 0 for its advantage: below the correct, untruncated ones
    truncated = [s for s in penalized.samples if s.reward == 1.0 and s.advantage < 0]
    assert len(truncated) == 4 and lowest < 0


def test_dynamic_sampling_refills_the_batch_from_further_examples():
    rows = ["all", "none", "all", "none", "long", "long", "long", "long"]
    plain = scripted_batch(rows)
    refilled = scripted_batch(rows, dynamic_sampling=True, max_sampling_rounds=4)
    assert plain.stats["groups_trained"] < 4 and plain.stats["sampling_rounds"] == 1
    # rounds of further examples until the step has its 4 groups, and no more than 4
    assert refilled.stats["groups_trained"] == 4 and refilled.stats["sampling_rounds"] > 1
    assert len(refilled.samples) == 16


def test_dynamic_sampling_never_draws_an_example_twice_in_a_step():
    """Refills are further examples: each round takes the next slice of one shuffle per step
    (independent draws per round repeated examples, so a group could train twice)."""
    import verifiers as vf
    from verifiers.rl.orchestrator import Orchestrator

    env = vf.SingleTurnEnv(
        dataset=[{"question": f"q{i}", "answer": "a"} for i in range(10)], rubric=vf.Rubric()
    )
    orch = Orchestrator(env, None, "m", examples_per_step=3, dynamic_sampling=True)
    for step in range(20):
        drawn = [row["question"] for r in range(4) for row in orch.examples_for(step, r)]
        assert len(drawn) == len(set(drawn)) == 10  # 3 + 3 + 3 + the last 1, each once
        assert orch.examples_for(step, 4) == []


def test_overlong_penalty_is_dapos_soft_linear_punishment():
    """0 up to max_tokens - L_cache, then linear to -penalty at max_tokens; truncated: all of it
    (a flat penalty on truncated replies before)."""
    import verifiers as vf
    from verifiers.rl.orchestrator import Orchestrator

    env = vf.SingleTurnEnv(dataset=[{"question": "q", "answer": "a"}], rubric=vf.Rubric())
    orch = Orchestrator(
        env, None, "m", max_tokens=20, overlong="penalize", overlong_buffer=8, overlong_penalty=0.5
    )

    def state(*turns, truncated=False):
        trajectory = [{"tokens": {"completion_ids": [1] * n}} for n in turns]
        return {"trajectory": trajectory, "is_truncated": truncated}

    assert orch.overlong_penalty(state(12)) == 0.0  # 20 - 8 = 12: the penalty starts after
    assert orch.overlong_penalty(state(16)) == pytest.approx(-0.25)  # halfway into the buffer
    assert orch.overlong_penalty(state(10, 18)) == pytest.approx(-0.375)  # its longest turn
    assert orch.overlong_penalty(state(20, truncated=True)) == -0.5
    default = Orchestrator(env, None, "m", max_tokens=20, overlong="penalize")
    assert default.config.overlong_start() == 16  # L_cache = a fifth of max_tokens (DAPO)


def test_batch_level_reward_scaling_divides_by_the_std_of_the_whole_batch():
    import statistics

    from verifiers.rl.advantages import batch_advantages

    groups = [[1.0, 0.0], [0.5, 0.5, 0.0, 1.0]]
    pooled = statistics.stdev([r for g in groups for r in g])
    expected = [[0.5 / (pooled + 1e-4), -0.5 / (pooled + 1e-4)]]
    assert batch_advantages("group_mean_batch_std", groups)[0] == pytest.approx(expected[0])
    per_group = batch_advantages("group_mean_std", groups)
    assert per_group[0] != pytest.approx(expected[0])  # the group's own std (0.707) differs
    batch = scripted_batch(["long"] * 4, advantage="group_mean_batch_std")
    rewards = [1.0, 0.0, 0.5, 1.0]
    scale = statistics.stdev(rewards * 4) + 1e-4  # every reward the step drew
    mean = statistics.fmean(rewards)
    assert by_reward(batch) == sorted((r, round((r - mean) / scale, 4)) for r in rewards * 4)


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


def test_ctrl_c_promises_a_resume_only_when_a_checkpoint_exists(policy_dir, tmp_path):
    """vf-rl interrupted before any checkpoint said 'continue with --resume (from the last
    checkpoint)', and --resume then refused: there was none."""
    import subprocess
    import sys
    import time

    out = tmp_path / "out"
    config = tmp_path / "rl.toml"
    config.write_text(
        f'model = "{policy_dir}"\nenv_id = "reverse-text"\noutput_dir = "{out}"\nsteps = 50\n'
        "[orchestrator]\nexamples_per_step = 2\nrollouts_per_example = 2\nmax_tokens = 8\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "verifiers.rl.cli", "@", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "400"},
    )
    deadline = time.monotonic() + 240
    while not (out / "metrics.jsonl").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 130, output
    assert "no checkpoint was written" in output and "--resume" not in output, output
    from verifiers.rl.command import interrupted_hint

    (out / "checkpoints" / "step_000003").mkdir(parents=True)
    assert interrupted_hint(out) == "continue with --resume (from step_000003)"
