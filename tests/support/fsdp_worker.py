"""Run by test_rl_trainer.py under torchrun (2 CPU processes, gloo): FSDP2 data parallelism must give the
same gradients, the same optimizer step and the same exported weights as one process, with
gradient checkpointing on the sharded side."""

import copy
import json
import sys
from pathlib import Path

import torch
from toy import random_samples, tiny_llama  # beside this script; odd count: uneven shards

from verifiers.rl.algorithm.trainer import Trainer
from verifiers.rl.configs.rl import TrainerConfig
from verifiers.rl.run.distributed import init_from_env, shutdown


def main() -> None:
    ctx = init_from_env()
    base = tiny_llama()
    reference = copy.deepcopy(base)
    settings = TrainerConfig(lr=1e-2, packing=False, micro_batch_size=1, max_grad_norm=1e9)
    # the sharded side also recomputes activations (gradient checkpointing under FSDP2): the
    # result must still be the single process's
    sharded = Trainer(base, settings.model_copy(update={"gradient_checkpointing": True}), dist=ctx)
    if not ctx.is_main:
        sharded.follow()
        shutdown(exit_code=0)
    single = Trainer(reference, settings)
    single.gradients(random_samples())
    expected = {n: p.grad.clone() for n, p in single.model.named_parameters()}
    sharded.train_step(random_samples())
    single.optimizer.step()
    out = Path(sys.argv[1])
    sharded.save_weights(out)
    sharded.stop_followers()
    from safetensors.torch import load_file

    exported = load_file(str(out / "model.safetensors"))
    report = {
        "weights_match": all(
            torch.allclose(exported[n], p.detach(), atol=1e-6)
            for n, p in single.model.named_parameters()
        ),
        "grads_checked": len(expected),
    }
    print(json.dumps(report), flush=True)
    shutdown(exit_code=0)


if __name__ == "__main__":
    main()
