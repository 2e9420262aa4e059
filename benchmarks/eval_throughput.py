"""Rollout throughput of the SDK against a bare AsyncOpenAI + semaphore loop.

Both send exactly the same requests to the same scripted test server, which runs in its own
process. Each cell runs in a fresh worker process so peak RSS is per cell.

    python benchmarks/eval_throughput.py            # full table (about 3 minutes on 2 cores)
    python benchmarks/eval_throughput.py --quick    # 1/10 of the rollouts

Cells: (a) single-turn, 2,000 prompts, a sync and an async reward function; (b) multi-turn,
500 prompts, two model calls per rollout; each at concurrency 32 and 256, rollouts_per_example 1
and 4. Columns: rollouts/s, client CPU ms per rollout, peak RSS (MB), SDK/baseline ratio.

A second table puts the v1 path (a v1 taskset, ``benchmarks/throughput_v1``, run through
``TasksetEnvironment`` as ``vf-eval ID`` runs one) beside the classic one on (a) single-turn and
(c) tool, 500 prompts, where the model calls an ``add`` tool once and then answers (two model
calls and one tool call per rollout, ``ToolEnv`` on the classic side): same prompts, same
replies, same reward. Its ratio is v1/classic client CPU per rollout, against the 1.25x target
(issue 41); ``--repeats 3`` takes the median of three runs of each cell.

    python benchmarks/eval_throughput.py --table v1 --quick --repeats 3
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
from typing import Any

import stop_cleanly  # beside this script

MODEL = "bench-model"
V1_TARGET = 1.25
"""Issue 41: the v1 path costs at most this many times the classic path's client CPU per rollout."""


def rows(kind: str, n: int) -> list[dict]:
    if kind == "tool":
        return [
            {"question": f"tool prompt number {i}: add 2 and 3 with the tool", "answer": "5"}
            for i in range(n)
        ]
    return [
        {"question": f"{kind} prompt number {i}: please repeat this text", "answer": f"{kind} {i}"}
        for i in range(n)
    ]


def policy(request: dict[str, Any]) -> Any:
    """The scripted model: offered tools and no tool result yet, it calls the first tool with
    2 and 3; with a result, it answers with it; otherwise it echoes the last user message."""
    from verifiers.testing import Reply, echo

    if request.get("tools"):
        results = [m for m in request.get("messages") or [] if m.get("role") == "tool"]
        if not results:
            name = request["tools"][0]["function"]["name"]
            return Reply(tool_calls=[Reply.tool_call(name, {"a": 2, "b": 3})])
        return str(results[-1]["content"])
    return echo(request)


def serve() -> None:
    """The scripted server in its own process, so its CPU is not the client's: READY <url>."""
    from verifiers.testing import ModelServer

    server = ModelServer(policy).start()
    print(f"READY {server.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)  # SIGTERM (stop_cleanly) raises SystemExit here
    finally:
        server.stop()


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- workers -------------------------------------------------------------------------------------


def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def role(message: Any) -> str:
    return message["role"] if isinstance(message, dict) else message.role


def measure(env: Any, url: str, n: int, concurrency: int, r: int) -> dict:
    start, cpu0 = time.perf_counter(), cpu_seconds()
    out = env.evaluate_sync(url, MODEL, rollouts_per_example=r, max_concurrent=concurrency)
    wall, cpu = time.perf_counter() - start, cpu_seconds() - cpu0
    errors = sum(1 for s in out.state if s["error"])
    assert len(out) == n * r, "every rollout is kept"
    # model calls (a classic rollout's trajectory steps, a v1 rollout's turns) and tool calls
    turns = sum(len(s.get("trajectory") or []) or s.get("turn", 0) for s in out.state) / len(out)
    tools = sum(role(m) == "tool" for s in out.state for m in s["completion"]) / len(out)
    return {
        "rollouts": len(out),
        "wall": wall,
        "cpu": cpu,
        "rss": peak_rss_mb(),
        "errors": errors,
        "turns": turns,
        "tools": tools,
    }


def sdk_worker(url: str, kind: str, n: int, concurrency: int, r: int) -> dict:
    import verifiers as vf

    def exact(completion, answer) -> float:
        return float(completion[-1]["content"] == answer)

    async def length(completion) -> float:
        return float(len(completion[-1]["content"]))

    rubric = vf.Rubric(funcs=[exact, length], weights=[1.0, 0.0])
    if kind == "single":
        env = vf.SingleTurnEnv(dataset=rows(kind, n), rubric=rubric)
    elif kind == "tool":
        env = vf.ToolEnv(dataset=rows(kind, n), rubric=rubric, tools=[add])
    else:

        class TwoCalls(vf.MultiTurnEnv):
            async def env_response(self, messages, state, **kwargs):
                return [{"role": "user", "content": "and once more"}]

        env = TwoCalls(dataset=rows(kind, n), rubric=rubric, max_turns=2)
    return measure(env, url, n, concurrency, r)


def v1_worker(url: str, kind: str, n: int, concurrency: int, r: int) -> dict:
    """The same workload as a v1 taskset (``throughput_v1``), run as ``vf-eval ID`` runs it."""
    from verifiers.v1.eval_env import TasksetEnvironment

    config = {"kind": kind, "n": n, "task": {"tools": kind == "tool"}}
    env = TasksetEnvironment("throughput-v1", env={"taskset": config})
    return measure(env, url, n, concurrency, r)


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


def classic_table(url: str, scale: int, console: Any) -> None:
    """The SDK's classic path against a bare AsyncOpenAI loop (the anchor)."""
    from rich.table import Table

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
    console.print(table)
    console.print(
        f"min SDK/baseline ratio: {min(ratios):.2f}x   geometric mean: {statistics.geometric_mean(ratios):.2f}x"
    )


def median_cell(url: str, which: str, kind: str, n: int, c: int, r: int, repeats: int) -> dict:
    """``repeats`` runs of a cell: the median rollouts/s and CPU ms per rollout (CPUs shared
    with other work make single runs noisy), the worst errors, and the first run's model and
    tool calls per rollout."""
    runs = [run_cell(url, which, kind, n, c, r) for _ in range(repeats)]
    return {
        "rate": statistics.median(x["rollouts"] / x["wall"] for x in runs),
        "cpu_ms": statistics.median(x["cpu"] / x["rollouts"] * 1000 for x in runs),
        "rss": statistics.median(x["rss"] for x in runs),
        "errors": max(x["errors"] for x in runs),
        "turns": runs[0]["turns"],
        "tools": runs[0]["tools"],
        "rollouts": runs[0]["rollouts"],
    }


def v1_table(url: str, scale: int, repeats: int, console: Any) -> None:
    """The v1 path beside the classic one on the same workloads."""
    from rich.table import Table

    table = Table(
        title=f"eval throughput: v1 taskset vs classic env (same requests, same server; "
        f"median of {repeats})"
    )
    for col in (
        "workload",
        "conc",
        "r",
        "rollouts",
        "calls/r",
        "classic r/s",
        "v1 r/s",
        "classic cpu ms/r",
        "v1 cpu ms/r",
        "v1/classic cpu",
        f"<= {V1_TARGET}x",
        "classic RSS MB",
        "v1 RSS MB",
        "errors",
    ):
        table.add_column(col, justify="right")
    cpu_ratios = []
    for kind, n in (("single", 2000 // scale), ("tool", 500 // scale)):
        for c in (32, 256):
            for r in (1, 4):
                classic = median_cell(url, "sdk", kind, n, c, r, repeats)
                v1 = median_cell(url, "v1", kind, n, c, r, repeats)
                same = (v1["turns"], v1["tools"]) == (classic["turns"], classic["tools"])
                assert same, f"both paths make the same model and tool calls: {classic} {v1}"
                ratio = v1["cpu_ms"] / classic["cpu_ms"]
                cpu_ratios.append(ratio)
                table.add_row(
                    kind,
                    str(c),
                    str(r),
                    str(v1["rollouts"]),
                    f"{v1['turns']:.0f} model, {v1['tools']:.0f} tool",
                    f"{classic['rate']:,.0f}",
                    f"{v1['rate']:,.0f}",
                    f"{classic['cpu_ms']:.2f}",
                    f"{v1['cpu_ms']:.2f}",
                    f"{ratio:.2f}x",
                    "yes" if ratio <= V1_TARGET else "NO",
                    f"{classic['rss']:.0f}",
                    f"{v1['rss']:.0f}",
                    f"{classic['errors']}/{v1['errors']}",
                )
    console.print(table)
    console.print(
        f"v1/classic client CPU per rollout: max {max(cpu_ratios):.2f}x   geometric mean "
        f"{statistics.geometric_mean(cpu_ratios):.2f}x   (target <= {V1_TARGET}x)"
    )


def main() -> None:
    stop_cleanly.install()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="a tenth of the rollouts, for a fast look"
    )
    parser.add_argument(
        "--table",
        choices=["all", "classic", "v1"],
        default="all",
        help="classic: SDK vs bare loop; v1: v1 taskset vs classic env (default: both)",
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="runs per cell of the v1 table (the median is shown)"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", choices=["sdk", "baseline", "v1"])
    parser.add_argument("--url")
    parser.add_argument("--kind", choices=["single", "multi", "tool"])
    parser.add_argument("-n", type=int)
    parser.add_argument("-c", type=int)
    parser.add_argument("-r", type=int)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.worker:
        fn = {"sdk": sdk_worker, "baseline": baseline_worker, "v1": v1_worker}[args.worker]
        print(json.dumps(fn(args.url, args.kind, args.n, args.c, args.r)))
        return
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, not {args.repeats}")

    from rich.console import Console

    scale = 10 if args.quick else 1
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        url = server.stdout.readline().split()[1]
        console = Console(width=190)
        if args.table in ("all", "classic"):
            classic_table(url, scale, console)
        if args.table in ("all", "v1"):
            v1_table(url, scale, args.repeats, console)
        total, bare = best_wall("import verifiers"), best_wall("pass")
        console.print(
            f"python -c 'import verifiers': {total * 1000:.0f} ms wall ({(total - bare) * 1000:.0f} ms over a bare interpreter)"
        )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
