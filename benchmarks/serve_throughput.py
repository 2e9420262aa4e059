"""Throughput and latency of vf-serve on the embedded SmolLM2-135M-Instruct.

    python benchmarks/serve_throughput.py [--model PATH_OR_NAME] [--dtype auto]

Prints tokens/s for one request and in total for 8 concurrent requests (128 tokens each,
ignore_eos so every request decodes the full length), and time to first token for a short
prompt (streaming). Targets on 2 idle cores: >= 20 tok/s (batch 1), >= 80 tok/s (batch 8),
first token < 0.5 s.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import httpx
import stop_cleanly  # beside this script
from rich.console import Console
from rich.table import Table

from verifiers.local_model.models import DEFAULT_MODEL
from verifiers.processes.server import start_server

PROMPTS = [
    f"Write a long story about a {x}."
    for x in ("dragon", "robot", "ship", "garden", "city", "storm", "violin", "comet")
]


async def generate(
    client: httpx.AsyncClient, url: str, model: str, prompt: str, max_tokens: int
) -> int:
    resp = await client.post(
        f"{url}/chat/completions",
        json={
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0.7,
            "ignore_eos": True,
        },
    )
    resp.raise_for_status()
    return resp.json()["usage"]["completion_tokens"]


async def throughput(url: str, model: str, concurrency: int, max_tokens: int) -> float:
    async with httpx.AsyncClient(timeout=300) as client:
        start = time.perf_counter()
        tokens = await asyncio.gather(
            *(generate(client, url, model, PROMPTS[i % 8], max_tokens) for i in range(concurrency))
        )
        return sum(tokens) / (time.perf_counter() - start)


def first_token_latency(url: str, model: str) -> float:
    start = time.perf_counter()
    with httpx.stream(
        "POST",
        f"{url}/chat/completions",
        timeout=60,
        json={
            "model": model,
            "messages": [{"role": "user", "content": "Hi!"}],
            "max_tokens": 16,
            "stream": True,
        },
    ) as resp:
        for line in resp.iter_lines():
            if '"content":"' in line and '"content":""' not in line:
                return time.perf_counter() - start
    return float("nan")


def main() -> None:
    stop_cleanly.install()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    log = stop_cleanly.scratch_dir("vf-bench-serve-") / "serve.log"
    with start_server(args.model, log_path=log, extra_args=["--dtype", args.dtype]) as server:
        url, model = server.base_url, server.model
        asyncio.run(throughput(url, model, 2, 16))  # warm up
        b1 = [asyncio.run(throughput(url, model, 1, 128)) for _ in range(args.repeats)]
        b8 = [asyncio.run(throughput(url, model, 8, 128)) for _ in range(args.repeats)]
        ttft = [first_token_latency(url, model) for _ in range(5)]
    table = Table(title=f"vf-serve {model} ({args.dtype})")
    for col in ("measure", "median", "best", "target", "ok"):
        table.add_column(col, justify="right")
    rows = [
        (
            "tokens/s, 1 request",
            statistics.median(b1),
            max(b1),
            ">= 20",
            statistics.median(b1) >= 20,
        ),
        (
            "tokens/s, 8 concurrent (total)",
            statistics.median(b8),
            max(b8),
            ">= 80",
            statistics.median(b8) >= 80,
        ),
        (
            "first token, short prompt (s)",
            statistics.median(ttft),
            min(ttft),
            "< 0.5",
            statistics.median(ttft) < 0.5,
        ),
    ]
    for name, median, best, target, ok in rows:
        table.add_row(name, f"{median:.2f}", f"{best:.2f}", target, "yes" if ok else "NO")
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
