"""What the trainer tests share: a scripted orchestrator and the loop run against a real
built-in server, random samples for a tiny model, scripted batches of rollouts, and a vf-rl or
vf-sft process stopped as a user or a scheduler stops it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SECRET = "test-weights-secret"  # what the trainer would make at launch (weight_access)
torch = pytest.importorskip("torch")


def step(prompt_ids, completion_ids, logprob=-0.5):
    return {
        "tokens": {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "completion_logprobs": [logprob] * len(completion_ids),
        }
    }


def torchrun(ranks: int, logs: Path) -> list[str]:
    """The command line that starts ``ranks`` local processes, its logs in ``logs`` (torchrun's
    default is a fresh directory in /tmp that nothing removes)."""
    launcher = shutil.which("torchrun") or str(Path(sys.executable).parent / "torchrun")
    return [launcher, "--standalone", "--nproc_per_node", str(ranks), "--log-dir", str(logs)]


def stop_and_resume_line(process: subprocess.Popen, sig: int) -> tuple[str, str]:
    """Stop a running vf-rl / vf-sft (its stdout piped, stderr joined) with ``sig``: the line
    it printed to copy (its command with --resume) and all it printed. It must exit 130."""
    process.send_signal(sig)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 130, output
    assert "Ctrl-C or SIGTERM stops the run and prints the line that resumes it" in output
    lines = output.splitlines()
    said = next((i for i, line in enumerate(lines) if "interrupted" in line), None)
    assert said is not None, output
    return lines[said + 1].strip(), output


def random_samples(n=5):
    from support.toy import random_samples as make

    return make(n)


def letter_orchestrator(server, cls, **overrides):
    """The letter task's orchestrator against ``server``: one recipe for every loop test, so the
    library loop and a hand-written one see the same rollouts."""
    from support.toy import letter_env
    from verifiers.clients import OpenAICompatibleClient

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
    from verifiers.rl.algorithm.trainer import Trainer
    from verifiers.rl.configs.rl import TrainerConfig
    from verifiers.rl.training.loop import LoopSettings, train
    from verifiers.rl.training.orchestrator import Orchestrator
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


def scripted_batch(rows, **orchestrator):
    """One step's Batch for a letter task whose replies are scripted per example (a real
    environment against a loopback OpenAI-compatible server)."""
    import asyncio
    import collections
    import re

    import verifiers as vf
    from verifiers.clients import OpenAICompatibleClient
    from verifiers.rl.training.orchestrator import Orchestrator
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


cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="needs a CUDA GPU (run scripts/gpu_check.sh on a GPU machine)",
)
