"""Peak memory of the LM head's logprobs (forward + backward) against the trainer's budget for it.

    python benchmarks/lm_head_memory.py [--chunk 1024] [--plain]

For each (K trained positions, V vocabulary) a fresh subprocess builds hidden states [K, H] and a
head weight [V, H] (H = 576, SmolLM2's), records its resident memory, runs log π(target) and the
entropy through ``verifiers.rl.algorithm.head`` forward and backward, and reports the rise of its peak
resident memory (``ru_maxrss``) above that: what the head allocated at its worst (glibc told to
map every allocation of 64 KiB or more on its own, so freed memory leaves at once). The budget is
``head_budget_bytes`` (what vf-rl's fit check reserves for the head). ``--plain`` also measures
the former path, full [K, V] logits through ``torch.log_softmax``. Target: peak ≤ 1.3 × budget at
K = 4,096, V = 49,152.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import stop_cleanly  # beside this script

os.environ.setdefault("OMP_NUM_THREADS", "2")

CASES = [(1024, 49152), (4096, 49152), (4096, 32000)]
HIDDEN = 576

CHILD = r"""
import json, resource, sys, torch
K, V, H, chunk, plain = json.loads(sys.argv[1])
torch.manual_seed(0)
hidden = torch.empty(1, K, H).normal_(0, 0.5).requires_grad_(True)  # no temporaries
weight = torch.empty(V, H).normal_(0, 0.02).requires_grad_(True)
targets = torch.randint(0, V, (1, K))
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()
before = rss()
assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 <= before + (64 << 20)
if plain:
    logp = torch.log_softmax(hidden @ weight.T, dim=-1)
    picked = logp.gather(-1, targets[..., None]).squeeze(-1)
    picked.sum().backward()
else:
    from verifiers.rl.algorithm.head import _ChunkedLogprobs
    picked, entropy = _ChunkedLogprobs.apply(hidden[0], weight, None, targets[0], 1.0, chunk, torch.float32)
    picked.sum().backward()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
print(json.dumps({"peak": peak}))
"""


# every allocation of 64 KiB or more is its own mapping, returned when freed: resident memory
# then follows what is allocated (glibc's sliding threshold would keep freed heap resident)
MALLOC = {"MALLOC_MMAP_THRESHOLD_": "65536", "MALLOC_TRIM_THRESHOLD_": "0"}


def measure(k: int, v: int, chunk: int, plain: bool) -> int:
    args = json.dumps([k, v, HIDDEN, chunk, plain])
    out = subprocess.run(
        [sys.executable, "-c", CHILD, args],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **MALLOC},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["peak"]


def main() -> None:
    stop_cleanly.install()
    from rich.console import Console
    from rich.table import Table

    from verifiers.rl.algorithm.head import head_budget_bytes

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunk", type=int, default=1024)
    parser.add_argument("--plain", action="store_true", help="also measure full [K, V] logits")
    args = parser.parse_args()
    table = Table(
        title=f"LM head peak memory, forward + backward (H = {HIDDEN}, chunk {args.chunk})"
    )
    for column in ("K", "V", "budget MiB", "chunked peak MiB", "peak / budget", "full logits MiB"):
        table.add_column(column, justify="right")
    mib = 2**20
    for k, v in CASES:
        budget = head_budget_bytes(k, args.chunk, v, HIDDEN)
        peak = measure(k, v, args.chunk, plain=False)
        plain = f"{measure(k, v, args.chunk, plain=True) / mib:,.0f}" if args.plain else "-"
        table.add_row(
            f"{k:,}",
            f"{v:,}",
            f"{budget / mib:,.0f}",
            f"{peak / mib:,.0f}",
            f"{peak / budget:.2f}×",
            plain,
        )
    Console().print(table)


if __name__ == "__main__":
    main()
