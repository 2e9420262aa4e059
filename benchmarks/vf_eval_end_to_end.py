"""`vf-eval` end to end, as a user runs it: the default path (environment workers) against the
in-process run (`--no-env-workers`) and against verifiers 0.1.8's own `vf-eval` (the anchor, in a
virtualenv of its own), on one scripted model server.

    python benchmarks/vf_eval_end_to_end.py                 # 300 examples x 2 rollouts, 5 runs each
    python benchmarks/vf_eval_end_to_end.py --no-anchor     # skip building the anchor's venv

Each run is a fresh `vf-eval` process (interpreter start, imports, loading the environment,
checking the endpoint, the rollouts, the summary), timed from outside: wall and the CPU of its
process tree; the table shows the median of the runs, the median of each round's ratio to the
in-process run (the paths run back to back in each round), and, for this SDK, the time to the
first finished rollout that `-v` prints. The
environment is a single-turn module written to a temporary directory and loaded by name by both
SDKs. Targets (issue 44): the default path at most 1.1x the in-process run and at most 0.3x
verifiers 0.1.8's `vf-eval`.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import stop_cleanly  # beside this script

MODEL = "bench-model"
ANCHOR = "verifiers==0.1.8.post2"

ENV_SOURCE = """
import verifiers as vf
from datasets import Dataset


def load_environment(num_examples: int = 300, **kwargs):
    rows = [{"question": f"repeat {i}", "answer": f"repeat {i}"} for i in range(num_examples)]

    def exact(completion, answer, **kwargs) -> float:
        return float(completion[-1]["content"] == answer)

    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[exact]))
"""


def anchor_python(work: Path) -> Path:
    """A virtualenv with verifiers 0.1.8.post2 from the package index (uv, cached after once)."""
    from uv import find_uv_bin

    venv = work / "anchor-venv"
    subprocess.run([find_uv_bin(), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    subprocess.run(
        [find_uv_bin(), "pip", "install", "-q", "--python", str(venv / "bin" / "python"), ANCHOR],
        check=True,
    )
    return venv / "bin" / "python"


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float | None, float]:
    """Wall seconds of one run, the time to the first rollout it printed (if it did), and the
    CPU seconds (user + system) of its process tree (its workers are reaped by it, so counted).
    A benchmark stopped meanwhile stops the run as a user would (SIGTERM, then waits), so
    vf-eval removes what it made; ``subprocess.run`` would SIGKILL it, which leaves its work
    dirs."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        out, err = proc.communicate()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{command[0]} failed ({proc.returncode}):\n{err[-3000:]}")
    first = re.search(r"first rollout finished ([0-9.]+) s", err + out)
    return wall, float(first.group(1)) if first else None, cpu


def main() -> None:
    stop_cleanly.install()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=300, help="examples")
    parser.add_argument("-r", type=int, default=2, help="rollouts per example")
    parser.add_argument("--runs", type=int, default=5, help="runs of each path (median shown)")
    parser.add_argument("--no-anchor", action="store_true", help="skip verifiers 0.1.8")
    args = parser.parse_args()
    from rich.console import Console
    from rich.table import Table

    work = stop_cleanly.scratch_dir("vf-bench-e2e-")
    (work / "bench_single.py").write_text(ENV_SOURCE)
    path = os.pathsep.join(p for p in (str(work), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "OPENAI_API_KEY": "bench"}
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    server = subprocess.Popen(
        [sys.executable, "-m", "verifiers.testing"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split()[1]
        ours = [str(Path(sys.executable).with_name("vf-eval")), "bench_single"]
        common = ["-b", url, "-m", MODEL, "-n", str(args.n), "-r", str(args.r), "--no-save", "-v"]
        paths: dict[str, tuple[list[str], dict[str, str]]] = {
            "this SDK, default (env workers)": ([*ours, *common], env),
            "this SDK, --no-env-workers": ([*ours, *common, "--no-env-workers"], env),
        }
        if not args.no_anchor:
            python = anchor_python(work)
            paths["verifiers 0.1.8.post2 vf-eval"] = (
                [
                    str(python.with_name("vf-eval")),
                    "bench_single",
                    *("--api-base-url", url, "--model", MODEL),
                    *("-n", str(args.n), "-r", str(args.r)),
                ],
                {**env, "PYTHONPATH": str(work)},  # its own venv's verifiers, never this one
            )
        results: dict[str, list[tuple[float, float | None, float]]] = {n: [] for n in paths}
        ratios: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
        for _ in range(args.runs):  # interleaved, so a busy moment costs every path alike
            for name, (command, command_env) in paths.items():
                results[name].append(timed(command, command_env))
            # each round's ratios, of runs back to back: the median of these is what a loaded
            # machine can compare (a busy minute slows one round, not one path)
            base = results["this SDK, --no-env-workers"][-1]
            for name in paths:
                run = results[name][-1]
                ratios[name].append((run[0] / base[0], run[2] / base[2]))
        wall = {name: statistics.median(r[0] for r in runs) for name, runs in results.items()}
        anchor = wall.get("verifiers 0.1.8.post2 vf-eval")
        table = Table(
            title=f"vf-eval end to end: {args.n} examples x {args.r} rollouts, "
            f"median of {args.runs} runs (target: default <= 1.1x in-process, <= 0.3x 0.1.8; "
            "x in-process: the median of each round's ratio)"
        )
        columns = ("path", "wall s", "CPU s", "first rollout s", "x in-process wall / CPU")
        for column in (*columns, "x 0.1.8"):
            table.add_column(column, justify="right" if column != "path" else "left")
        for name, runs in results.items():
            firsts = [f for _, f, _ in runs if f is not None]
            table.add_row(
                name,
                f"{wall[name]:.2f}",
                f"{statistics.median(r[2] for r in runs):.2f}",
                f"{statistics.median(firsts):.2f}" if firsts else "-",
                f"{statistics.median(w for w, _ in ratios[name]):.2f} / "
                f"{statistics.median(c for _, c in ratios[name]):.2f}",
                f"{wall[name] / anchor:.2f}" if anchor else "-",
            )
        Console(width=140).print(table)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
