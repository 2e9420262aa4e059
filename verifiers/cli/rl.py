"""vf-rl: train a model on an environment with GRPO-style RL.

    vf-rl @ examples/rl/uppercase_cpu.toml [--steps 20] [--trainer.lr 2e-5] [--resume]

Starts the inference server on the policy (vf-serve, or vLLM with inference.backend = "vllm"),
runs rollouts against it, trains in this process (FSDP2 over all ranks under torchrun), and ships
new weights to the server after every step (inference.weight_transport: filesystem, gloo or
nccl). Writes metrics.jsonl, a metrics.png plot and checkpoints under ``output_dir``; --resume
continues from the latest checkpoint. If either side dies, the other is stopped and the reason
printed. Every setting, with its default:
"""

from __future__ import annotations

import sys

from verifiers.cli.training import command_main, parse_overrides
from verifiers.rl.configs.rl import RLConfig
from verifiers.rl.training.rl import input_problem, nccl_settings, run


def parse_args(argv: list[str]) -> tuple[RLConfig, bool]:
    data, resume = parse_overrides(argv, __doc__, RLConfig, "examples/rl/uppercase_cpu.toml")
    return RLConfig.model_validate(data), resume


def main(argv: list[str] | None = None) -> int:
    return command_main(
        "vf-rl", parse_args, run, argv, before_run=nccl_settings, input_problem=input_problem
    )


if __name__ == "__main__":
    sys.exit(main())
