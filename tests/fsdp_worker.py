"""Run by test_rl.py under torchrun (2 CPU processes, gloo): FSDP2 data parallelism must give the
same gradients, the same optimizer step and the same exported weights as one process."""

import copy
import json
import sys
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from verifiers.rl.batching import Sample
from verifiers.rl.distributed import init_from_env, shutdown
from verifiers.rl.trainer import Trainer, TrainerSettings


def samples() -> list[Sample]:
    g = torch.Generator().manual_seed(1)
    out = []
    for i in range(5):  # odd: the ranks get different numbers of samples and micro-batches
        n = int(torch.randint(6, 14, (1,), generator=g))
        ids = torch.randint(1, 64, (n,), generator=g).tolist()
        mask = [0] * 3 + [1] * (n - 3)
        out.append(Sample(ids, mask, [(-1.0 if m else 0.0) for m in mask], float(i) - 2.0, 0.0, 0))
    return out


def main() -> None:
    ctx = init_from_env()
    torch.manual_seed(0)
    base = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=128,
        )
    )
    reference = copy.deepcopy(base)
    settings = TrainerSettings(lr=1e-2, packing=False, micro_batch_size=1, max_grad_norm=1e9)
    sharded = Trainer(base, settings, dist=ctx)
    if not ctx.is_main:
        sharded.follow()
        shutdown()
        return
    single = Trainer(reference, settings)
    single.gradients(samples())
    expected = {n: p.grad.clone() for n, p in single.model.named_parameters()}
    sharded.train_step(samples())
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
    shutdown()


if __name__ == "__main__":
    main()
