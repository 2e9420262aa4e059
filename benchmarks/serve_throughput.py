"""Throughput and latency of vf-serve on the embedded SmolLM2-135M-Instruct.

    python benchmarks/serve_throughput.py [--model PATH_OR_NAME] [--dtype auto]

Prints tokens/s for one request and in total for 8 concurrent requests (128 tokens each,
ignore_eos so every request decodes the full length), and time to first token for a short
prompt (streaming). Targets on 2 idle cores: >= 20 tok/s (batch 1), >= 80 tok/s (batch 8),
first token < 0.5 s.

A second table is what vf-serve's bounds cost (``--bounds-only`` runs it alone): the header,
body, drain and stall deadlines of its HTTP protocol, the per-client budget (requests, tokens,
body bytes), the per-client turns at the prompt lanes and the peer lookup they key on. It sets
vf-serve against the same command run without them inside this benchmark (the plain uvicorn
protocol, no budget, no body deadline, every client anonymous to no one), side by side, and
compares the server process's CPU per request, the two taking turns (``cpu_ab``: wall time on a
shared machine says mostly how busy the others are): 1-token and 32-token chat completions, 8
at a time, and ``GET /v1/models`` (no model work at all: the protocol's deadlines weigh the
most there). Target: on / off <= 1.05.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

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


def serve_unbounded(argv: list[str]) -> None:
    """vf-serve without its bounds, for the comparison only: the command itself (same model,
    engine, routes and settings), with uvicorn's plain protocol for the one with deadlines, no
    client budget, no body deadline, and no peer lookup (so no per-client turns either)."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    import verifiers.cli.serve as vf_serve
    import verifiers.serve.app as serve_app
    from verifiers.serve.limits import ClientBudget

    bounded_app = serve_app.build_app

    def unbounded_app(service: Any, **_: Any) -> Any:
        return bounded_app(service, budget=ClientBudget(max_tokens=0), read_timeout=None)  # type: ignore[arg-type]

    vf_serve.header_timeout_protocol = lambda _: HttpToolsProtocol  # type: ignore[assignment,return-value]
    serve_app.build_app = unbounded_app  # type: ignore[assignment]
    serve_app.client_of = lambda _: None  # type: ignore[assignment,return-value]
    vf_serve.main(argv)


def bounds_table(model: str, dtype: str, quick: bool) -> Table:
    """What vf-serve's bounds cost: server CPU per request, bounds on against off."""
    from cpu_ab import BOUNDS_COLUMNS, Side, bounds_row, interleaved

    from verifiers.processes.server import free_port, launch

    scratch = stop_cleanly.scratch_dir("vf-bench-serve-bounds-")
    # one compute thread each, not spinning: the CPU counted is work, not threads waiting
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "OMP_NUM_THREADS": "1"}
    port = free_port()
    unbounded = [sys.executable, __file__, "--serve-unbounded", model, "--dtype", dtype]
    unbounded += ["--host", "127.0.0.1", "--port", str(port)]
    with (
        start_server(
            model, log_path=scratch / "on.log", extra_args=["--dtype", dtype], env_overrides=env
        ) as on_server,
        launch(unbounded, port=port, log_path=scratch / "off.log", env=env, timeout=300) as off,
    ):
        servers = {"on": on_server, "off": off}

        def chat(side: str, max_tokens: int, count: int) -> Callable[[], int]:
            server = servers[side]

            async def send() -> int:
                limit = asyncio.Semaphore(8)
                async with httpx.AsyncClient(timeout=300) as client:

                    async def one(i: int) -> int:
                        async with limit:
                            prompt = PROMPTS[i % 8]
                            return await generate(
                                client, server.base_url, server.model, prompt, max_tokens
                            )

                    await asyncio.gather(*(one(i) for i in range(count)))
                return count

            return lambda: asyncio.run(send())

        def models(side: str, count: int) -> Callable[[], int]:
            url = f"{servers[side].base_url}/models"

            def send() -> int:
                with httpx.Client(timeout=60) as client:
                    for _ in range(count):
                        client.get(url).raise_for_status()
                return count

            return send

        rounds = 4 if quick else 6
        workloads = [
            ("chat, 1 token, 8 at a time", lambda side: chat(side, 1, 16 if quick else 32)),
            ("chat, 32 tokens, 8 at a time", lambda side: chat(side, 32, 8 if quick else 16)),
            ("GET /v1/models (no model work)", lambda side: models(side, 200 if quick else 1000)),
        ]
        table = Table(title=f"vf-serve's bounds ({model}, {dtype})")
        for col in BOUNDS_COLUMNS:
            table.add_column(col, justify="right")
        for name, batch in workloads:
            on, off_side = (Side(servers[side].process.pid, batch(side)) for side in ("on", "off"))
            on.batch(), off_side.batch()  # warm up
            table.add_row(*bounds_row(name, *interleaved(on, off_side, rounds)))
    return table


def main() -> None:
    stop_cleanly.install()
    if sys.argv[1:2] == ["--serve-unbounded"]:
        serve_unbounded(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bounds-only", action="store_true", help="only the bounds' table")
    parser.add_argument("--quick", action="store_true", help="fewer requests and rounds")
    args = parser.parse_args()
    if args.bounds_only:
        Console(width=120).print(bounds_table(args.model, args.dtype, args.quick))
        return
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
    Console(width=120).print(bounds_table(args.model, args.dtype, args.quick))


if __name__ == "__main__":
    main()
