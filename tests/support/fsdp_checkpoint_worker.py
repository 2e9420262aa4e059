"""Run by test_rl_trainer.py, under torchrun (FSDP2, 2 CPU ranks) or as one process: train four steps
with a checkpoint after two, or resume from that checkpoint and train the last two; export the
final weights. Both runs must end with the same weights, on any number of ranks."""

import sys
from pathlib import Path

from toy import random_samples, tiny_llama  # beside this script

from verifiers.rl.algorithm.trainer import Trainer
from verifiers.rl.configs.rl import TrainerConfig
from verifiers.rl.run.distributed import init_from_env, shutdown

STEPS = 4


def main() -> None:
    mode, checkpoint, export = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    ctx = init_from_env()
    settings = TrainerConfig(lr=1e-2, warmup_steps=1, schedule="cosine", packing=False)
    trainer = Trainer(tiny_llama(), settings, total_steps=STEPS, dist=ctx)
    start = trainer.load_checkpoint(checkpoint)["step"] if mode == "resume" else 0
    if ctx is not None and not ctx.is_main:
        trainer.follow()
        shutdown(exit_code=0)
    for step in range(start, STEPS):
        trainer.train_step(random_samples(seed=step + 1))
        if mode == "full" and step + 1 == 2:
            trainer.save_checkpoint(checkpoint, step + 1, {})
    trainer.save_weights(export)
    trainer.stop_followers()
    print(f"done at version {trainer.version}", flush=True)
    shutdown(exit_code=0)


if __name__ == "__main__":
    main()
