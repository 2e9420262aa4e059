"""Peak memory and time of one vf-rl training step: every weight vs LoRA adapters (peft).

    python benchmarks/lora_memory.py [--model SmolLM2-135M-Instruct] [--rank 16]

Each side runs in a fresh subprocess: the policy is loaded (float32, as vf-rl trains), its
resident memory recorded, then two GRPO steps of 8 samples × 256 tokens (AdamW) are taken and the
rise of the peak resident memory above the loaded model is reported, with the trainable
parameters and the second step's time. LoRA keeps no gradients or Adam moments for the base.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import stop_cleanly  # beside this script

os.environ.setdefault("OMP_NUM_THREADS", "2")

CHILD = r"""
import json, resource, sys, time, torch
from transformers import AutoModelForCausalLM
from verifiers.rl.algorithm.batching import Sample
from verifiers.rl.configs.rl import TrainerConfig
from verifiers.rl.algorithm.trainer import Trainer
spec = json.loads(sys.argv[1])
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(spec["model_dir"], dtype="float32")
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()
before = rss()
config = TrainerConfig(lr=1e-5, lora={"rank": spec["rank"], "alpha": 2 * spec["rank"]} if spec["lora"] else None)
trainer = Trainer(model, config)
vocab = model.config.vocab_size
samples = []
for i in range(8):
    ids = torch.randint(0, vocab, (256,)).tolist()
    mask = [0] * 64 + [1] * 192
    samples.append(Sample(ids, mask, [-5.0 if m else 0.0 for m in mask], float(i % 2) - 0.5, 0.0, 0))
trainer.train_step(samples)
start = time.perf_counter()
trainer.train_step(samples)
seconds = time.perf_counter() - start
trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
print(json.dumps({"peak": peak, "seconds": seconds, "trainable": trainable}))
"""


# allocations of 64 KiB or more get their own mappings, returned when freed, so resident
# memory follows what is allocated (glibc's sliding threshold keeps freed heap resident)
MALLOC = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}


def main() -> None:
    stop_cleanly.install()
    from rich.console import Console
    from rich.table import Table

    from verifiers.local_model.models import DEFAULT_MODEL, resolve_model_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--rank", type=int, default=16)
    args = parser.parse_args()
    model_dir, _ = resolve_model_dir(args.model)
    rows = {}
    for name, lora in (("full", False), (f"LoRA r {args.rank}", True)):
        spec = json.dumps({"model_dir": str(model_dir), "rank": args.rank, "lora": lora})
        out = subprocess.run(
            [sys.executable, "-c", CHILD, spec],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, **MALLOC},
        )
        rows[name] = json.loads(out.stdout.strip().splitlines()[-1])
    table = Table(title=f"one GRPO step, {args.model}, 8 × 256 tokens, AdamW, float32, CPU")
    for column in ("weights trained", "trainable parameters", "peak memory MiB", "s / step"):
        table.add_column(column, justify="right")
    for name, r in rows.items():
        table.add_row(
            name, f"{r['trainable']:,}", f"{r['peak'] / 2**20:,.0f}", f"{r['seconds']:.1f}"
        )
    Console().print(table)


if __name__ == "__main__":
    main()
