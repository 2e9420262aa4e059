"""vf-sft: supervised fine-tuning on conversations, on the same trainer core as vf-rl.

    vf-sft @ examples/sft/uppercase_cpu.toml [--steps 40] [--trainer.lr 2e-5] [--resume]

Input (``[data] path``): a dataset written by ``vf-data`` (or any directory ``datasets`` loads),
a local ``.parquet`` / ``.jsonl`` / ``.json`` file, with a ``messages`` column, or ``prompt`` and
``completion`` columns of messages. Each conversation is tokenized with the model's chat template
and trained on its assistant tokens only (``verifiers.rl.algorithm.chat_tokens``), with the
trainer's packing, optimizer, schedules, checkpoints and FSDP2. With ``[eval] env_id``,
held-out reward on that environment is measured before the first step, every ``every`` steps and
after the last (the model is served by vf-serve and updated as vf-rl does). Writes
``metrics.jsonl``, ``eval.jsonl``, ``metrics.png``, ``config.json``, ``checkpoints/`` and
``weights/`` (a model directory that ``vf-eval -m``, ``vf-serve`` and vf-rl's ``model =`` take).
Every setting, with its default:
"""

from __future__ import annotations

import sys

from verifiers.cli.training import command_main, parse_overrides
from verifiers.rl.configs.sft import SFTConfig
from verifiers.rl.training.sft import input_problem, run


def parse_args(argv: list[str]) -> tuple[SFTConfig, bool]:
    data, resume = parse_overrides(argv, __doc__, SFTConfig, "examples/sft/uppercase_cpu.toml")
    return SFTConfig.model_validate(data), resume


def main(argv: list[str] | None = None) -> int:
    return command_main("vf-sft", parse_args, run, argv, input_problem=input_problem)


if __name__ == "__main__":
    sys.exit(main())
