"""Environment workers against in-process runs, on the same scripted model server.

    python benchmarks/env_workers.py            # full table (about 2 minutes on 2 cores)
    python benchmarks/env_workers.py --quick    # 1/5 of the rollouts

Two workloads, each cell in a fresh process so its numbers are its own:

- a rubric with a 20 ms blocking sync reward (``time.sleep``: a slow checker or tokenizer), run in
  process and at 1, 2 and 4 workers (target: at least 1.8x in-process at 2 workers on 2 cores);
- the plain single-turn workload (2,000 rollouts, concurrency 256), in process and on the default
  worker path (``--env-workers auto``), for the cost of the default (target: at least 0.8x).

Rollouts/s counts from the moment the workers are ready; starting them (a fresh interpreter
each, loading the environment) is shown apart, since a run pays it once. Peak RSS is that of the whole process tree (caller and workers, sampled every 20 ms), not of the
caller alone. The environment is a module written to a temporary directory and loaded by id, as
workers load every environment.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import stop_cleanly  # beside this script

MODEL = "bench-model"

ENV_SOURCE = '''
import time
import verifiers as vf


def exact(completion, answer) -> float:
    return float(completion[-1]["content"] == answer)


def slow_check(completion) -> float:
    """A blocking sync reward: 20 ms during which its event loop does nothing else."""
    time.sleep(0.02)
    return 1.0


def load_environment(kind="plain", n=2000):
    rows = [{"question": f"prompt number {i}: please repeat this", "answer": f"prompt number {i}: please repeat this"} for i in range(n)]
    funcs = [exact, slow_check] if kind == "blocking" else [exact]
    return vf.SingleTurnEnv(dataset=rows, rubric=vf.Rubric(funcs=funcs))
'''


def cell_worker(url: str, kind: str, n: int, concurrency: int, workers: str) -> dict:
    import asyncio

    import verifiers as vf
    from verifiers.workers import start_workers

    async def run() -> dict:
        env = vf.load_environment("bench-env-workers", kind=kind, n=n)
        started = time.perf_counter()
        pool = None if workers == "none" else await start_workers(workers, env)
        start = time.perf_counter()
        try:
            out = await env.evaluate(url, MODEL, max_concurrent=concurrency, env_workers=pool)
        finally:
            wall = time.perf_counter() - start
            if pool is not None:
                await pool.close()
        assert len(out) == n, "every rollout is kept"
        errors = sum(1 for s in out.state if s["error"])
        return {"rollouts": len(out), "wall": wall, "start": start - started, "errors": errors}

    return asyncio.run(run())


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_cell(url: str, env_dir: str, kind: str, n: int, concurrency: int, workers: str) -> dict:
    cmd = [sys.executable, __file__, "--cell", kind, "--url", url, "-n", str(n)]
    cmd += ["-c", str(concurrency), "--workers", workers]
    env = {**os.environ, "PYTHONPATH": f"{env_dir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    peak, done = 0, threading.Event()

    def sample() -> None:
        nonlocal peak
        proc = psutil.Process(child.pid)
        while not done.is_set():
            try:
                peak = max(peak, tree_rss(proc))
            except psutil.Error:
                return
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, _ = child.communicate()
    done.set()
    sampler.join()
    if child.returncode:
        raise SystemExit(f"cell {kind} workers={workers} failed (exit {child.returncode})")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["tree_rss_mb"] = peak / 2**20
    return result


def main() -> None:
    stop_cleanly.install()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a fifth of the rollouts")
    parser.add_argument("--cell", choices=["blocking", "plain"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("-n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("-c", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--workers", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        print(json.dumps(cell_worker(args.url, args.cell, args.n, args.c, args.workers)))
        return

    from rich.console import Console
    from rich.table import Table

    scale = 5 if args.quick else 1
    env_dir = str(stop_cleanly.scratch_dir("vf-bench-env-"))
    Path(env_dir, "bench_env_workers.py").write_text(ENV_SOURCE)
    server = subprocess.Popen(
        [sys.executable, "-m", "verifiers.testing"], stdout=subprocess.PIPE, text=True
    )
    console = Console(width=150)
    try:
        url = server.stdout.readline().split()[1]
        table = Table(title=f"environment workers vs in process ({os.cpu_count()} cores)")
        for col in ("workload", "rollouts", "conc", "workers", "start s", "rollouts/s"):
            table.add_column(col, justify="right")
        table.add_column("vs in process", justify="right")
        for col in ("tree peak RSS MB", "errors"):
            table.add_column(col, justify="right")
        checks: list[str] = []
        workloads = (
            ("blocking", "20 ms sync reward", 400 // scale, 64, ("none", "1", "2", "4")),
            ("plain", "single-turn", 2000 // scale, 256, ("none", "auto")),
        )
        for kind, label, n, conc, settings in workloads:
            base_rate = None
            for workers in settings:
                cell = run_cell(url, env_dir, kind, n, conc, workers)
                rate = cell["rollouts"] / cell["wall"]
                base_rate = base_rate or rate
                table.add_row(
                    label,
                    str(cell["rollouts"]),
                    str(conc),
                    "in process" if workers == "none" else workers,
                    f"{cell['start']:.1f}",
                    f"{rate:,.0f}",
                    f"{rate / base_rate:.2f}x",
                    f"{cell['tree_rss_mb']:.0f}",
                    str(cell["errors"]),
                )
                if kind == "blocking" and workers == "2":
                    checks.append(
                        f"blocking reward at 2 workers: {rate / base_rate:.2f}x (target >= 1.8x)"
                    )
                if kind == "plain" and workers == "auto":
                    checks.append(
                        f"single-turn on the default worker path: {rate / base_rate:.2f}x (target >= 0.8x)"
                    )
        console.print(table)
        for line in checks:
            console.print(line)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
