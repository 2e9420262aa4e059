"""The async loop against a real built-in server: the staleness bound, level 0 equal to a
synchronous loop, resume, generation ahead of training, logprobs of the sampling distribution,
a dead server reported, checkpoints kept, and a tiny model that learns."""

from __future__ import annotations

import os
import signal

import pytest
from support.trainer_runs import cuda, letter_orchestrator, run_loop

SECRET = "test-weights-secret"  # what the trainer would make at launch (weight_access)
torch = pytest.importorskip("torch")


@pytest.mark.slow
def test_no_trained_sample_exceeds_the_staleness_bound(policy_dir, tmp_path):
    from verifiers.rl.training.orchestrator import Orchestrator

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


@pytest.mark.slow
def test_level_zero_matches_a_synchronous_loop_bit_for_bit(policy_dir, tmp_path):
    import asyncio

    from transformers import AutoModelForCausalLM

    from verifiers.processes.server import start_server
    from verifiers.rl.algorithm.trainer import Trainer
    from verifiers.rl.configs.rl import TrainerConfig
    from verifiers.rl.training.orchestrator import Orchestrator
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


@pytest.mark.slow
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
    from verifiers.rl.training.orchestrator import Orchestrator

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


@pytest.mark.slow
def test_trainer_logprobs_are_of_the_sampling_distribution_at_any_temperature(policy_dir, tmp_path):
    """At temperature 0.6 the server reports logprobs of softmax(logits / 0.6); the trainer must
    compute the same, or every importance ratio is off before any training happens."""
    history, _ = run_loop(policy_dir, tmp_path, steps=1, lag=0, temperature=0.6)
    assert abs(history[0]["mean_ratio"] - 1) < 1e-4
    assert abs(history[0]["mismatch_kl"]) < 1e-5


def test_a_killed_inference_server_is_detected_and_reported(policy_dir, tmp_path):
    from verifiers.rl.training.orchestrator import Orchestrator
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


def test_only_the_newest_checkpoints_are_kept(tmp_path):
    from verifiers.rl.run.command import latest_checkpoint, prune_checkpoints

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


CRASHING_LETTERS = '''
import os

from support.toy import letter_env


def crash_on_example_2(completion, prompt, **kwargs) -> float:
    """Kills the worker scoring example 2 (a segfaulting extension, an os._exit in a tool)."""
    if "(2)" in prompt[-1]["content"]:
        os._exit(3)
    return 0.0


def load_environment():
    env = letter_env(num_examples=4)
    env.rubric.add_reward_func(crash_on_example_2, weight=0.0)
    return env
'''


@pytest.mark.slow
def test_a_crashing_example_costs_vf_rl_only_its_own_group_and_training_goes_on(
    policy_dir, tmp_path, monkeypatch
):
    """vf-rl generates through the environment-worker pool (an environment loaded by id):
    one example whose reward kills its worker, in flight beside the others at -c 8, costs each
    step only its own group (its 4 rollouts errors, the other 3 groups trained), and every
    step trains."""
    import verifiers as vf
    from verifiers.rl.training.orchestrator import Orchestrator

    source = tmp_path / "src"
    source.mkdir()
    (source / "vf_letters_crash.py").write_text(CRASHING_LETTERS)
    tests_dir = os.path.dirname(os.path.dirname(__file__))  # the workers import support.toy
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(source), tests_dir, os.environ.get("PYTHONPATH", "")])
    )
    monkeypatch.syspath_prepend(str(source))

    class CrashingLetters(Orchestrator):
        def __init__(self, env, *args, **kwargs):
            env = vf.load_environment("vf-letters-crash")
            super().__init__(env, *args, env_workers="2", **kwargs)

    history, trainer = run_loop(
        policy_dir, tmp_path / "run", steps=2, lag=0, concurrent=8, orchestrator_cls=CrashingLetters
    )
    assert [h["step"] for h in history] == [0, 1] and trainer.version == 2
    assert [h["rollout_errors"] for h in history] == [4, 4]
    assert [h["groups_trained"] for h in history] == [3, 3]
    assert all(h["env_workers"] == 2 and not h.get("skipped") for h in history)
    assert history[-1]["env_worker_restarts"] >= 2  # the culprit, alone, twice a step
