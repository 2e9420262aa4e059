"""Rollout throughput of the SDK against a bare AsyncOpenAI + semaphore loop.

Both send exactly the same requests to the same scripted test server, which runs in its own
process. Each cell runs in a fresh worker process so peak RSS is per cell.

    python benchmarks/eval_throughput.py            # full table (about 3 minutes on 2 cores)
    python benchmarks/eval_throughput.py --quick    # 1/10 of the rollouts

Cells: (a) single-turn, 2,000 prompts, a sync and an async reward function; (b) multi-turn,
500 prompts, two model calls per rollout; each at concurrency 32 and 256, rollouts_per_example 1
and 4. Columns: rollouts/s, client CPU ms per rollout, peak RSS (MB), SDK/baseline ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time

import stop_cleanly  # beside this script

MODEL = "bench-model"


def rows(kind: str, n: int) -> list[dict]:
    return [
        {"question": f"{kind} prompt number {i}: please repeat this text", "answer": f"{kind} {i}"}
        for i in range(n)
    ]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- workers -------------------------------------------------------------------------------------


def sdk_worker(url: str, kind: str, n: int, concurrency: int, r: int) -> dict:
    import verifiers as vf

    def exact(completion, answer) -> float:
        return float(completion[-1]["content"] == answer)

    async def length(completion) -> float:
        return float(len(completion[-1]["content"]))

    rubric = vf.Rubric(funcs=[exact, length], weights=[1.0, 0.0])
    if kind == "single":
        env = vf.SingleTurnEnv(dataset=rows(kind, n), rubric=rubric)
    else:

        class TwoCalls(vf.MultiTurnEnv):
            async def env_response(self, messages, state, **kwargs):
                return [{"role": "user", "content": "and once more"}]

        env = TwoCalls(dataset=rows(kind, n), rubric=rubric, max_turns=2)
    start, cpu0 = time.perf_counter(), cpu_seconds()
    out = env.evaluate_sync(url, MODEL, rollouts_per_example=r, max_concurrent=concurrency)
    wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu0
    errors = sum(1 for s in out.state if s["error"])
    assert len(out) == n * r, "every rollout is kept"
    return {"rollouts": len(out), "wall": wall, "cpu": cpu, "rss": peak_rss_mb(), "errors": errors}


def baseline_worker(url: str, kind: str, n: int, concurrency: int, r: int) -> dict:
    from openai import AsyncOpenAI

    async def run() -> int:
        client = AsyncOpenAI(base_url=url, api_key="bench", max_retries=3)
        sem = asyncio.Semaphore(concurrency)
        prompts = [[{"role": "user", "content": row["question"]}] for row in rows(kind, n)]

        async def rollout(prompt: list[dict]) -> int:
            async with sem:
                messages = list(prompt)
                reply = await client.chat.completions.create(model=MODEL, messages=messages)
                if kind == "multi":
                    messages += [
                        {"role": "assistant", "content": reply.choices[0].message.content},
                        {"role": "user", "content": "and once more"},
                    ]
                    reply = await client.chat.completions.create(model=MODEL, messages=messages)
                return 1

        done = await asyncio.gather(*(rollout(p) for p in prompts for _ in range(r)))
        await client.close()
        return sum(done)

    start, cpu0 = time.perf_counter(), cpu_seconds()
    count = asyncio.run(run())
    return {
        "rollouts": count,
        "wall": time.perf_counter() - start,
        "cpu": cpu_seconds() - cpu0,
        "rss": peak_rss_mb(),
        "errors": 0,
    }


# --- driver --------------------------------------------------------------------------------------


def run_cell(url: str, which: str, kind: str, n: int, c: int, r: int) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        which,
        "--url",
        url,
        "--kind",
        kind,
        "-n",
        str(n),
        "-c",
        str(c),
        "-r",
        str(r),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def best_wall(code: str) -> float:
    times = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    stop_cleanly.install()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="a tenth of the rollouts, for a fast look"
    )
    parser.add_argument("--worker", choices=["sdk", "baseline"])
    parser.add_argument("--url")
    parser.add_argument("--kind", choices=["single", "multi"])
    parser.add_argument("-n", type=int)
    parser.add_argument("-c", type=int)
    parser.add_argument("-r", type=int)
    args = parser.parse_args()
    if args.worker:
        fn = sdk_worker if args.worker == "sdk" else baseline_worker
        print(json.dumps(fn(args.url, args.kind, args.n, args.c, args.r)))
        return

    from rich.console import Console
    from rich.table import Table

    scale = 10 if args.quick else 1
    server = subprocess.Popen(
        [sys.executable, "-m", "verifiers.testing"], stdout=subprocess.PIPE, text=True
    )
    try:
        url = server.stdout.readline().split()[1]
        table = Table(
            title="eval throughput: SDK vs bare AsyncOpenAI loop (same requests, same server)"
        )
        for col in (
            "env",
            "conc",
            "r",
            "rollouts",
            "SDK r/s",
            "base r/s",
            "ratio",
            "SDK cpu ms/r",
            "base cpu ms/r",
            "SDK RSS MB",
            "base RSS MB",
            "errors",
        ):
            table.add_column(col, justify="right")
        ratios = []
        for kind, n in (("single", 2000 // scale), ("multi", 500 // scale)):
            for c in (32, 256):
                for r in (1, 4):
                    sdk = run_cell(url, "sdk", kind, n, c, r)
                    base = run_cell(url, "baseline", kind, n, c, r)
                    sdk_rate, base_rate = (
                        sdk["rollouts"] / sdk["wall"],
                        base["rollouts"] / base["wall"],
                    )
                    ratios.append(sdk_rate / base_rate)
                    table.add_row(
                        kind,
                        str(c),
                        str(r),
                        str(sdk["rollouts"]),
                        f"{sdk_rate:,.0f}",
                        f"{base_rate:,.0f}",
                        f"{sdk_rate / base_rate:.2f}x",
                        f"{sdk['cpu'] / sdk['rollouts'] * 1000:.2f}",
                        f"{base['cpu'] / base['rollouts'] * 1000:.2f}",
                        f"{sdk['rss']:.0f}",
                        f"{base['rss']:.0f}",
                        str(sdk["errors"]),
                    )
        console = Console(width=170)
        console.print(table)
        console.print(
            f"min SDK/baseline ratio: {min(ratios):.2f}x   geometric mean: {statistics.geometric_mean(ratios):.2f}x"
        )
        total, bare = best_wall("import verifiers"), best_wall("pass")
        console.print(
            f"python -c 'import verifiers': {total * 1000:.0f} ms wall ({(total - bare) * 1000:.0f} ms over a bare interpreter)"
        )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
