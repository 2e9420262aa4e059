"""Evaluation throughput on the default path (environment workers, as ``vf-eval`` runs) at
concurrency 256, beside a bare ``AsyncOpenAI`` + semaphore loop and the real verifiers 0.3.1 (from
the package index, in a virtualenv of its own), all against one scripted model server.

    python benchmarks/eval_default_path.py              # 2,000 rollouts a cell, 3 rounds
    python benchmarks/eval_default_path.py --quick      # 1/10 of the rollouts, 1 round
    python benchmarks/eval_default_path.py --no-anchor  # skip building verifiers 0.3.1's venv
    python benchmarks/eval_default_path.py --before DIR # the default path of checkout DIR too

Workloads: (a) single-turn, 2,000 prompts; (b) tool, 2,000 prompts, where the model calls an
``add`` tool once and then answers (two model calls and one tool call a rollout; ``ToolEnv``).
Rubric: a sync exact-match reward and an async length metric. Sides, each cell a fresh process
(the rounds alternate them, so a load that comes and goes hits all sides alike):

- ``default``: the environment loaded by id and its workers forked from the caller
  (``--env-workers auto``, vf-eval's ``load_and_launch``), then ``env.evaluate(...,
  env_workers=pool)``;
- ``in-process``: the same environment, ``env_workers=None`` (for reference);
- ``bare``: ``AsyncOpenAI`` with a semaphore sending the same requests (for the tool workload it
  answers the tool call itself: no schema, no parsing, no scoring);
- ``before`` (with ``--before DIR``): the default path with DIR's ``verifiers`` package, for a
  before/after of a change in one run;
- ``0.3.1``: verifiers 0.3.1's ``SingleTurnEnv`` / ``ToolEnv`` with the same rubric, in process
  (its ``evaluate``).

Figures: CPU per rollout of the cell's process tree (the caller and its workers, psutil; the
server's is not counted: it runs in a process of its own), rollouts/s from the first request to
the last score (the workers' start apart), and the peak RSS of the process tree sampled every
20 ms from outside, and its summed PSS (each page a forked worker shares with the caller counted
once, not once a process as summed RSS does). The ratios are the anchor's CPU per rollout over the default path's: on
2 shared cores, CPU is what a side costs, wall is what the neighbours left it. Targets (issue
44): at least 4x the bare loop and 3x verifiers 0.3.1; tree peak RSS at most 250 MB for 2,000
rollouts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import stop_cleanly  # beside this script

MODEL = "bench-model"
ANCHOR = "verifiers==0.3.1"
TARGETS = {"bare": 4.0, "0.3.1": 3.0}
RSS_TARGET_MB = 250

ENV_SOURCE = '''
import verifiers as vf


def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def exact(completion, answer) -> float:
    return float(completion[-1]["content"] == answer)


async def length(completion) -> float:
    return float(len(completion[-1]["content"]))


def rows(kind, n):
    if kind == "tool":
        return [{"question": f"tool prompt number {i}: add 2 and 3 with the tool", "answer": "5"}
                for i in range(n)]
    return [{"question": f"single prompt number {i}: please repeat this text", "answer": f"single {i}"}
            for i in range(n)]


def load_environment(kind="single", n=2000):
    try:
        from datasets import Dataset
        dataset = Dataset.from_list(rows(kind, n))
    except ImportError:
        dataset = rows(kind, n)
    rubric = vf.Rubric(funcs=[exact, length], weights=[1.0, 0.0])
    if kind == "tool":
        return vf.ToolEnv(dataset=dataset, rubric=rubric, tools=[add])
    return vf.SingleTurnEnv(dataset=dataset, rubric=rubric)
'''

ANCHOR_CELL = """
import asyncio, json, resource, sys, time
import bench_eval_default as module
from verifiers.legacy.types import ClientConfig

url, kind, n, c = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
env = module.load_environment(kind, n)
config = ClientConfig(api_base_url=url, api_key_var="VF_BENCH_KEY")

def cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime

kept = []


async def main():
    # the outputs kept here, not as the main task's result: on its way out asyncio.run formats
    # its SIGINT handler, main task and result included, with repr (every state: seconds of
    # CPU that are the driver's, not the anchor's; this SDK's own sides return a small dict)
    kept.append(await env.evaluate(config, "bench-model", max_concurrent=c))


start, cpu0 = time.perf_counter(), cpu()
asyncio.run(main())
out = kept[0]
wall, used = time.perf_counter() - start, cpu() - cpu0
outputs = out["outputs"] if isinstance(out, dict) else out.outputs
errors = sum(1 for o in outputs if (o.get("error") if isinstance(o, dict) else o.error))
print(json.dumps({"rollouts": len(outputs), "wall": wall, "cpu": used, "errors": errors}))
"""


def tree_cpu() -> float:
    """User + system CPU seconds of this process and its live descendants."""
    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            times = p.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def sdk_cell(url: str, kind: str, n: int, c: int, side: str) -> dict:
    import verifiers as vf
    from verifiers.cli.eval.start import load_and_launch

    async def run() -> dict:
        launched: list[Any] = []
        workers = "auto" if side == "default" else None
        env = load_and_launch("bench-eval-default", workers, {"kind": kind, "n": n}, launched)
        pool = await launched[0].start() if launched else None
        try:
            start, cpu0 = time.perf_counter(), tree_cpu()
            out = await env.evaluate(url, MODEL, max_concurrent=c, env_workers=pool)
            wall, cpu = time.perf_counter() - start, tree_cpu() - cpu0
        finally:
            if pool is not None:
                await pool.close()
        errors = sum(1 for s in out.state if s["error"])
        return {"rollouts": len(out), "wall": wall, "cpu": cpu, "errors": errors}

    del vf
    return asyncio.run(run())


def bare_cell(url: str, kind: str, n: int, c: int) -> dict:
    from openai import AsyncOpenAI

    sys.path.insert(0, os.environ["VF_BENCH_ENV_DIR"])
    from bench_eval_default import rows  # type: ignore[import-not-found]

    tool = {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }

    async def run() -> int:
        client = AsyncOpenAI(base_url=url, api_key="bench", max_retries=3)
        sem = asyncio.Semaphore(c)

        async def rollout(question: str) -> int:
            async with sem:
                messages: list[Any] = [{"role": "user", "content": question}]
                if kind != "tool":
                    await client.chat.completions.create(model=MODEL, messages=messages)
                    return 1
                reply = await client.chat.completions.create(
                    model=MODEL, messages=messages, tools=[tool]
                )
                call = reply.choices[0].message.tool_calls[0]
                args = json.loads(call.function.arguments)
                messages += [
                    reply.choices[0].message.model_dump(exclude_none=True),
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": str(args["a"] + args["b"]),
                    },
                ]
                await client.chat.completions.create(model=MODEL, messages=messages, tools=[tool])
                return 1

        done = await asyncio.gather(*(rollout(row["question"]) for row in rows(kind, n)))
        await client.close()
        return sum(done)

    start, cpu0 = time.perf_counter(), tree_cpu()
    count = asyncio.run(run())
    return {"rollouts": count, "wall": time.perf_counter() - start, "cpu": tree_cpu() - cpu0}


def tree_memory(proc: psutil.Process, pss: bool) -> tuple[int, int]:
    """The summed RSS of ``proc`` and its descendants, and (when ``pss``) their summed PSS: RSS
    counts each page a forked worker still shares with its parent once per process, PSS splits
    it among them (what the tree really holds)."""
    rss = proportional = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            if pss:
                info = p.memory_full_info()
                proportional += info.pss
            else:
                info = p.memory_info()
            rss += info.rss
        except psutil.Error:
            pass
    return rss, proportional


def run_cell(command: list[str], env: dict[str, str], cwd: Path | None = None) -> dict:
    """One cell in a fresh process; its last line of output, and its tree's peak RSS (sampled
    every 20 ms) and PSS (every 100 ms: reading smaps costs more)."""
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env, cwd=cwd)
    peak, peak_pss, done = 0, 0, threading.Event()

    def sample() -> None:
        nonlocal peak, peak_pss
        proc = psutil.Process(child.pid)
        tick = 0
        while not done.is_set():
            try:
                rss, pss = tree_memory(proc, pss=tick % 5 == 0)
            except psutil.Error:
                return
            peak, peak_pss, tick = max(peak, rss), max(peak_pss, pss), tick + 1
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        stdout, _ = child.communicate()
    except BaseException:
        child.terminate()
        child.wait()
        raise
    finally:
        done.set()
        sampler.join()
    if child.returncode:
        raise SystemExit(f"cell {command[-5:]} failed (exit {child.returncode})")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["rss"], result["pss"] = peak / 2**20, peak_pss / 2**20
    return result


def anchor_python(work: Path) -> Path:
    """A virtualenv with verifiers 0.3.1 from the package index (uv, cached after once)."""
    from uv import find_uv_bin

    venv = work / "anchor-venv"
    subprocess.run([find_uv_bin(), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [find_uv_bin(), "pip", "install", "-q", "--python", str(python), ANCHOR, "psutil"],
        check=True,
    )
    return python


def main() -> None:
    stop_cleanly.install()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a tenth of the rollouts, 1 round")
    parser.add_argument("--no-anchor", action="store_true", help="skip verifiers 0.3.1")
    parser.add_argument("--rounds", type=int, help="rounds of every cell (default 3; 1 quick)")
    parser.add_argument("-c", type=int, default=256, help="concurrency (default 256)")
    parser.add_argument(
        "--before",
        metavar="DIR",
        help="also run the default path with the verifiers package of another checkout DIR "
        "(e.g. a git worktree of the commit before a change), alternated with this one",
    )
    parser.add_argument("--cell", nargs=4, help=argparse.SUPPRESS)  # side url kind n
    args = parser.parse_args()
    if args.cell:
        side, url, kind, n = args.cell
        if side == "bare":
            result = bare_cell(url, kind, int(n), args.c)
        else:
            result = sdk_cell(url, kind, int(n), args.c, side)
        print(json.dumps(result))
        return

    import eval_throughput  # beside this script: the scripted server and its policy
    from rich.console import Console
    from rich.table import Table

    n = 200 if args.quick else 2000
    rounds = args.rounds or (1 if args.quick else 3)
    work = stop_cleanly.scratch_dir("vf-bench-default-")
    env_dir = work / "env"
    env_dir.mkdir()
    (env_dir / "bench_eval_default.py").write_text(ENV_SOURCE)
    ours = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(env_dir), os.environ.get("PYTHONPATH")])),
        "VF_BENCH_ENV_DIR": str(env_dir),
    }
    sides = ["default", "in-process", "bare"]
    commands = {
        side: [sys.executable, __file__, "-c", str(args.c), "--cell", side] for side in sides
    }
    envs = {side: ours for side in sides}
    if args.before:
        sides.insert(1, "before")
        commands["before"] = [*commands["default"][:-1], "default"]
        before = str(Path(args.before).resolve())
        envs["before"] = {**ours, "PYTHONPATH": os.pathsep.join([str(env_dir), before])}
    if not args.no_anchor:
        python = anchor_python(work)
        sides.append("0.3.1")
        commands["0.3.1"] = [str(python), "-c", ANCHOR_CELL]
        # its own venv's verifiers, never this checkout's
        envs["0.3.1"] = {
            **os.environ,
            "PYTHONPATH": str(env_dir),
            "VF_BENCH_KEY": "bench",
            "TQDM_DISABLE": "1",  # its progress bar, a line per rollout in a pipe
        }
    server = subprocess.Popen(
        [sys.executable, eval_throughput.__file__, "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        url = server.stdout.readline().split()[1]
        results: dict[tuple[str, str], list[dict]] = {}
        for _ in range(rounds):
            for kind in ("single", "tool"):
                for side in sides:
                    if side == "0.3.1":
                        command = [*commands[side], url, kind, str(n), str(args.c)]
                    else:
                        command = [*commands[side], url, kind, str(n)]
                    # the anchor runs outside this checkout: ``-c`` puts the cwd first on its path
                    cwd = work if side == "0.3.1" else None
                    results.setdefault((kind, side), []).append(run_cell(command, envs[side], cwd))
    finally:
        server.terminate()
        server.wait()
    table = Table(
        title=f"eval throughput, default path (env workers) at c={args.c}: median of {rounds} "
        f"round(s), {os.cpu_count()} cores"
    )
    columns = ("workload", "side", "rollouts", "cpu ms/r", "r/s", "tree RSS MB", "tree PSS MB")
    for col in (*columns, "errors"):
        table.add_column(col, justify="right")
    for anchor in TARGETS:
        table.add_column(f"{anchor} cpu / default cpu (>= {TARGETS[anchor]:g}x)", justify="right")
    table.add_column(f"RSS <= {RSS_TARGET_MB} (PSS)", justify="right")

    def cpu_ms(kind: str, side: str) -> float:
        return statistics.median(x["cpu"] / x["rollouts"] * 1000 for x in results[kind, side])

    for kind in ("single", "tool"):
        for side in sides:
            cells = results[kind, side]
            ratios = [
                f"{cpu_ms(kind, a) / cpu_ms(kind, side):.2f}x"
                if side in ("default", "before") and (kind, a) in results
                else ""
                for a in TARGETS
            ]
            rss = statistics.median(x["rss"] for x in cells)
            pss = statistics.median(x["pss"] for x in cells)
            table.add_row(
                kind,
                side,
                str(cells[0]["rollouts"]),
                f"{cpu_ms(kind, side):.2f}",
                f"{statistics.median(x['rollouts'] / x['wall'] for x in cells):,.0f}",
                f"{rss:.0f}",
                f"{pss:.0f}",
                str(max(x.get("errors", 0) for x in cells)),
                *ratios,
                (
                    f"{'yes' if rss <= RSS_TARGET_MB else 'NO'} "
                    f"({'yes' if pss <= RSS_TARGET_MB else 'NO'})"
                )
                if side in ("default", "before")
                else "",
            )
    Console(width=190).print(table)


if __name__ == "__main__":
    main()
