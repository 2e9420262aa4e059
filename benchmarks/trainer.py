"""Trainer step time, synchronous vs asynchronous, on a CPU toy policy.

    python benchmarks/trainer.py [--steps 8] [--hidden 256] [--layers 4]

Runs the same RL job twice against a real vf-serve: max_off_policy_steps=0 (generate, then train)
and =1 (the next batch generates while this one trains). Prints generation time, training time
and wall time per step. Target: the async step within 15% of max(generation, training); the
synchronous one is their sum.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # support.toy: the tests' toy

import stop_cleanly  # beside this script
from rich.console import Console
from rich.table import Table


def run(
    policy: Path, work: Path, lag: int, steps: int, examples: int, rollouts: int, tokens: int
) -> list[dict]:
    from support.toy import letter_env
    from transformers import AutoModelForCausalLM

    from verifiers.clients import OpenAICompatibleClient
    from verifiers.processes.server import start_server
    from verifiers.rl.algorithm.trainer import Trainer
    from verifiers.rl.configs.rl import TrainerConfig
    from verifiers.rl.training.loop import LoopSettings, train
    from verifiers.rl.training.orchestrator import Orchestrator
    from verifiers.weights.access import new_secret
    from verifiers.weights.transport import FilesystemTransport

    server = start_server(
        str(policy),
        log_path=work / f"serve-{lag}.log",
        extra_args=["--dtype", "float32", "--served-model-name", "policy"],
        env_overrides={"OMP_WAIT_POLICY": "PASSIVE"},
        weights_secret=(secret := new_secret()),
        trusted_weights_dirs=[work],
    )
    try:
        trainer = Trainer(AutoModelForCausalLM.from_pretrained(policy), TrainerConfig(lr=1e-3))
        orchestrator = Orchestrator(
            letter_env(),
            OpenAICompatibleClient(server.base_url),
            "policy",
            examples_per_step=examples,
            rollouts_per_example=rollouts,
            max_tokens=tokens,
            max_concurrent=64,
        )
        return train(
            orchestrator,
            trainer,
            FilesystemTransport(server.base_url, work / f"weights-{lag}", secret=secret),
            LoopSettings(steps, lag, 0, work / f"run-{lag}", keep_checkpoints=0),
        )
    finally:
        server.stop()


def main() -> None:
    stop_cleanly.install()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--examples", type=int, default=8)
    parser.add_argument("--rollouts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=48)
    args = parser.parse_args()
    from support.toy import make_tiny_policy

    work = stop_cleanly.scratch_dir("vf-trainer-bench-")
    policy = make_tiny_policy(work / "policy", hidden=args.hidden, layers=args.layers)
    table = Table(
        title=f"trainer step time (toy policy hidden={args.hidden} layers={args.layers}, {args.examples}x{args.rollouts} rollouts x {args.tokens} tokens)"
    )
    for col in (
        "mode",
        "generation s",
        "training s",
        "wall s/step",
        "max(gen, train)",
        "sum",
        "wall / max",
    ):
        table.add_column(col, justify="right")
    for label, lag in (("synchronous (lag 0)", 0), ("async (lag 1)", 1)):
        history = run(policy, work, lag, args.steps, args.examples, args.rollouts, args.tokens)[
            1:
        ]  # skip warm-up
        gen = statistics.median(h["generation_s"] for h in history)
        trn = statistics.median(h["train_s"] for h in history)
        wall = statistics.median(h["step_s"] for h in history)
        table.add_row(
            label,
            f"{gen:.2f}",
            f"{trn:.2f}",
            f"{wall:.2f}",
            f"{max(gen, trn):.2f}",
            f"{gen + trn:.2f}",
            f"{wall / max(gen, trn):.2f}",
        )
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
