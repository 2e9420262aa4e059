"""Chaos: thousands of rollouts through ``vf-eval`` while everything around them fails.

    python benchmarks/chaos.py            # 4,000 examples x 2 rollouts (a few minutes on 2 cores)
    python benchmarks/chaos.py --quick    # a fifth

A multi-turn tool environment (three tool calls, then an answer) runs through the real
``vf-eval`` command, in its environment workers, against a fault-injecting model server in a
process of its own. Runs of the same size, each a fresh ``vf-eval``: the fault-free run and
phase 1 alternated ``--rounds`` times (3; --quick 1), their median wall times compared (one
pair's ratio moved from 1.14x to 1.41x between runs on a quiet machine), then phase 2:

- **fault-free**: the same server and environment with no fault, for the wall-time baseline;
- **phase 1**: chosen examples fail on every request at their second turn (429 with Retry-After,
  500, 502, 503, a connection dropped mid-body, a truncated JSON body, a reply slower than the
  group timeout); a few percent of all other requests fail once at random (429/5xx/drop/
  truncated, seeded), which retries absorb; chosen examples misbehave in the environment
  (``os._exit``, a segfault, a hang past ``--group-timeout``, a memory blow-up past
  ``VF_WORKER_MEMORY_MB``, an exception in a reward, a sync tool that never returns); and worker
  processes (named ``vf-env-worker``, under vf-eval) are SIGKILLed at random moments;
- **phase 2**: the same faults, and ``vf-eval`` itself SIGTERMed or SIGKILLed mid-run and
  continued with ``--resume`` until it finishes.

A second table says where each run's wall time went: when the first rollout, the last innocent
rollout and the last faulty one were recorded, and the CPU seconds of every process the run
started (vf-eval, its workers, the model server): on a machine shared with other work, wall time
says how busy the machine was as much as what the run did, and CPU time says the work.

Why 4,000 examples (8,000 rollouts): the issue's run is thousands of rollouts with faults
sprinkled through it, and a faulty example's own time limit is its own to spend: the hang and
the sync tool that never returns end 5 s and 7 s after they start, the reply slower than the
timeout 5 s, the 502 after its retries' 3 s or so, wherever they sit in the dataset. With the
model server answering at once, 1,000 examples ran in 4 s on a quiet machine, shorter than those
limits: the slow reply alone (at 0.75 of the dataset) could end no sooner than about 2x the
fault-free run (0.75 x 4 s + 5 s), so no scheduler could meet 1.3x, and the ratio said how fast
the machine was, not whether faults cost others. At 4,000 the run (15 s quiet) is long beside the limits, as a real one with a real model
is, and the 13 faulty examples are about 3 in a thousand, nearer the issue's one in a thousand;
the faults stay where the seeded sample puts them (``choose_faults``), spread over the whole run.

Results are read from the run directory (``results.jsonl``, ``metadata.json``). Targets: 0 lost,
0 duplicated, 0 errors on innocent examples (every faulty example's rollouts are errors), and
phase 1's wall time at most 1.3x the fault-free run's (phase 2 restarts vf-eval and reruns the
groups each kill cut off, so its wall time is shown, not held to that).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import stop_cleanly  # beside this script

MODEL = "chaos-model"
ENV_ID = "bench-chaos"
TURNS = 3  # tool calls per rollout before the answer
ROLLOUTS = 2
GROUP_TIMEOUT = 5.0  # default of --group-timeout
MEMORY_MB = 700  # each worker's budget (VF_WORKER_MEMORY_MB); "grow" allocates twice that
RANDOM_FAULT_RATE = 0.03  # of all requests, failing once at random

ENV_FAULTS = ("exit", "segfault", "hang", "grow", "raise", "tool_hang")
ENDPOINT_FAULTS = ("429", "500", "502", "503", "drop", "truncated", "slow")
TRANSIENT = ("429", "500", "502", "503", "drop", "truncated")

ENV_SOURCE = f'''
import asyncio, ctypes, os, time
import verifiers as vf

FAULTS: dict[int, str] = {{}}


def lookup(key: int, step: int) -> str:
    """Look up one fact of a task.

    Args:
        key: the task's number.
        step: which fact.
    """
    if FAULTS.get(key) == "tool_hang":
        time.sleep(3600)  # a sync tool that never returns: its worker's event loop is stuck
    return f"fact {{key}}.{{step}}"


def correct(completion, answer) -> float:
    return float(completion[-1]["content"] == answer)


async def behaviour(info) -> float:
    fault = info.get("fault")
    if fault == "exit":
        os._exit(3)
    if fault == "segfault":
        ctypes.string_at(0)
    if fault == "hang":  # past the group timeout (it yields: the worker answers it)
        await asyncio.sleep(3600)
    if fault == "grow":  # every page written, so resident
        held = b"x" * ({2 * MEMORY_MB} * 2**20)
        await asyncio.sleep(60)
        return float(len(held) > 0)
    if fault == "raise":
        raise RuntimeError("injected: this reward function fails")
    return 1.0


def load_environment(n=1000, faults=None):
    FAULTS.update({{int(k): v for k, v in (faults or {{}}).items()}})
    rows = [
        {{
            "question": f"task {{i}}: look up {TURNS} facts, then say done",
            "answer": f"done {{i}}",
            "info": {{"fault": FAULTS.get(i, "")}},
        }}
        for i in range(n)
    ]
    return vf.ToolEnv(
        tools=[lookup],
        dataset=rows,
        rubric=vf.Rubric(funcs=[correct, behaviour]),
        max_turns={TURNS + 2},
    )
'''


# --- the fault-injecting model server (its own process) ------------------------------------------
def serve(plan: dict[int, str], rate: float, seed: int) -> None:
    from verifiers.testing import STALLED_S, ModelServer, Reply, last_user_text

    rng = random.Random(seed)
    lock = threading.Lock()

    def fault_reply(kind: str) -> Reply:
        if kind == "429":
            return Reply(status=429, headers={"Retry-After": "0.2"})
        if kind in ("500", "502", "503"):
            return Reply(status=int(kind), error=f"injected HTTP {kind}")
        if kind == "drop":
            return Reply(drop_connection=True)
        if kind == "truncated":
            return Reply(raw_body=b'{"id": "x", "choices": [{"message": {"content": "tru')
        if kind == "slow":  # past the group timeout
            return Reply(content="too late", delay=STALLED_S * 60)
        raise ValueError(f"not an endpoint fault: {kind}")

    def handler(request: dict) -> Reply:
        example = int(last_user_text(request).split()[1].rstrip(":"))
        done = sum(1 for m in request.get("messages", []) if m.get("role") == "tool")
        if example in plan and done == 1:  # mid-rollout: its second turn, every time
            return fault_reply(plan[example])
        with lock:
            roll, kind = rng.random(), rng.choice(TRANSIENT)
        if roll < rate:
            return fault_reply(kind)
        if done < TURNS:
            return Reply(tool_calls=[Reply.tool_call("lookup", {"key": example, "step": done})])
        return Reply(content=f"done {example}")

    server = ModelServer(handler, model_name=MODEL).start()
    print(f"READY {server.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        server.stop()


def start_server(plan: dict[int, str], rate: float, seed: int) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, __file__, "--serve", json.dumps(plan), "--rate", str(rate)]
    proc = subprocess.Popen([*cmd, "--seed", str(seed)], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if not line.startswith("READY"):
        raise SystemExit(f"the model server did not start: {line!r}")
    return proc, line.split()[1]


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- vf-eval runs ---------------------------------------------------------------------------------
def vf_eval() -> list[str]:
    script = Path(sys.executable).with_name("vf-eval")
    return [str(script)] if script.exists() else [sys.executable, "-m", "verifiers.cli.eval"]


def worker_pids(parent: int) -> list[int]:
    """vf-eval's environment workers: the processes under it named as workers (those forked
    from vf-eval itself keep its command line; before they were named, they were never
    killed), but not the template they are forked from (killing it kills every worker at
    once)."""
    from verifiers.workers.process import WORKER_NAME

    try:
        children = psutil.Process(parent).children(recursive=True)
    except psutil.Error:
        return []
    pids = []
    for child in children:
        try:
            if child.name() == WORKER_NAME:
                pids.append(child.pid)
        except psutil.Error:
            continue
    return pids


class Segment:
    """One vf-eval process; a thread SIGKILLs its workers at random moments when asked."""

    def __init__(self, cmd: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log.open("ab")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.workers_killed = 0
        self.workers_seen: set[int] = set()
        self._done = threading.Event()

    def kill_workers(self, rng: random.Random, every: tuple[float, float], most: int) -> None:
        def loop() -> None:
            while self.workers_killed < most:
                if self._done.wait(rng.uniform(*every)):
                    return
                pids = worker_pids(self.proc.pid)
                if pids:
                    victim = rng.choice(sorted(pids))
                    try:
                        os.kill(victim, signal.SIGKILL)
                        self.workers_killed += 1
                    except ProcessLookupError:
                        pass

        threading.Thread(target=loop, daemon=True).start()

    def watch(self) -> None:
        """Note the workers it runs (to check none outlives it)."""

        def loop() -> None:
            while not self._done.wait(0.2):
                self.workers_seen.update(worker_pids(self.proc.pid))

        threading.Thread(target=loop, daemon=True).start()

    def wait(self) -> int:
        try:
            return self.proc.wait()
        finally:
            self._done.set()
            self.log.close()

    def leftover_workers(self) -> int:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            alive = [p for p in self.workers_seen if psutil.pid_exists(p) and _not_zombie(p)]
            if not alive:
                return 0
            time.sleep(0.2)
        return len(alive)


class Timeline:
    """When each rollout first appeared in the run's ``results.jsonl`` (seconds from ``t0``,
    looked at every half second): where a run's wall time goes (the fault-free part of the
    work, then the faulty examples' own time limits)."""

    def __init__(self, out: Path, t0: float) -> None:
        self.out, self.t0 = out, t0
        self.seen: dict[tuple[int, int], float] = {}
        self._offset = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._done.wait(0.5):
            self.read()

    def read(self) -> None:
        run_dir = run_dir_of(self.out)
        path = run_dir / "results.jsonl" if run_dir is not None else None
        if path is None or not path.exists():
            return
        now = time.perf_counter() - self.t0
        with path.open("rb") as f:
            if path.stat().st_size < self._offset:  # rewritten (a resume): read it again
                self._offset = 0
            f.seek(self._offset)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]
        self._offset += len(complete)
        for line in complete.splitlines():
            try:
                row = json.loads(line)
                key = (int(row["example_id"]), int(row["rollout_index"]))
            except (ValueError, KeyError, TypeError):
                continue
            self.seen.setdefault(key, now)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
        self.read()

    def last(self, examples: set[int], among: bool) -> float:
        """When the last rollout of an example in (``among``) or not in ``examples`` appeared."""
        times = [t for (e, _), t in self.seen.items() if (e in examples) == among]
        return max(times, default=0.0)


def _children_cpu() -> float:
    """CPU seconds (user + system) of every process this one started and waited for, and of
    theirs: vf-eval, its workers and their template, the model server (stopped after each
    run). What a run cost in work, apart from how busy the machine was with others."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _not_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def run_dir_of(out: Path) -> Path | None:
    found = sorted(out.glob("evals/*/*/metadata.json"))
    return found[0].parent if found else None


def result_rows(run_dir: Path | None) -> list[dict]:
    if run_dir is None:
        return []
    from verifiers.results.writer import read_rows

    return list(read_rows(run_dir / "results.jsonl"))


def measure(
    label: str,
    url: str,
    env_dir: Path,
    out: Path,
    n: int,
    concurrency: int,
    faults: dict[int, str],
    rng: random.Random | None,
    kill_workers: int,
    kill_caller: int,
    group_timeout: float = GROUP_TIMEOUT,
) -> dict:
    """One run of vf-eval (phase 2: several, each resuming the last) and what it recorded."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{env_dir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "VF_WORKER_MEMORY_MB": str(MEMORY_MB),
    }
    env_args = json.dumps({"n": n, "faults": {str(k): v for k, v in faults.items()}})
    # how it runs, which --resume does not restore (it restores what the run is)
    how = ["-c", str(concurrency), "--group-timeout", str(group_timeout)]
    fresh = [ENV_ID, "-b", url, "-m", MODEL, "-n", str(n), "-r", str(ROLLOUTS), "-a", env_args]
    fresh += [*how, "--output-dir", str(out)]
    log = out / "vf-eval.log"
    out.mkdir(parents=True, exist_ok=True)
    expected = n * ROLLOUTS
    stats: dict[str, Any] = {
        "label": label,
        "segments": 0,
        "workers_killed": 0,
        "caller_kills": 0,
        "left": 0,
    }
    started, cpu_before = time.perf_counter(), _children_cpu()
    timeline = Timeline(out, started)
    while True:
        run_dir = run_dir_of(out)
        args = [ENV_ID, "--resume", str(run_dir), *how] if run_dir is not None else fresh
        segment = Segment([*vf_eval(), *args], env, log)
        stats["segments"] += 1
        segment.watch()
        if rng is not None and kill_workers:
            segment.kill_workers(rng, (1.0, 6.0), kill_workers - stats["workers_killed"])
        code: int | None = None
        if rng is not None and stats["caller_kills"] < kill_caller:
            # stop it somewhere between a tenth and most of what is left
            have = len(result_rows(run_dir_of(out)))
            target = have + int(rng.uniform(0.1, 0.7) * (expected - have))
            stop_with = rng.choice([signal.SIGTERM, signal.SIGKILL])
            while segment.proc.poll() is None:
                if len(result_rows(run_dir_of(out))) >= target:
                    segment.proc.send_signal(stop_with)
                    stats["caller_kills"] += 1
                    break
                time.sleep(0.25)
        code = segment.wait()
        stats["workers_killed"] += segment.workers_killed
        stats["left"] += segment.leftover_workers()
        if code == 0:
            break
        if stats["caller_kills"] > kill_caller or stats["segments"] > kill_caller + 3:
            tail = log.read_text(errors="replace")[-3000:]
            raise SystemExit(f"{label}: vf-eval exited with {code}\n{tail}")
    stats["wall"] = time.perf_counter() - started
    stats["cpu"] = _children_cpu() - cpu_before
    timeline.stop()
    stats["first_row"] = min(timeline.seen.values(), default=0.0)
    stats["innocent_done"] = timeline.last(set(faults), among=False)
    stats["faulty_done"] = timeline.last(set(faults), among=True)
    run_dir = run_dir_of(out)
    assert run_dir is not None
    rows = result_rows(run_dir)
    meta = json.loads((run_dir / "metadata.json").read_text())
    keys = Counter((int(r["example_id"]), int(r["rollout_index"])) for r in rows)
    wanted = {(e, i) for e in range(n) for i in range(ROLLOUTS)}
    stats.update(
        expected=expected,
        recorded=len(set(keys) & wanted),
        duplicated=sum(c - 1 for c in keys.values()),
        lost=len(wanted - set(keys)),
        restarts=(meta.get("env_workers") or {}).get("restarts", 0),
        isolated=(meta.get("env_workers") or {}).get("isolated", 0),
        isolation_workers=(meta.get("env_workers") or {}).get("isolation_workers", 0),
        beside_held=(meta.get("env_workers") or {}).get("rerun_beside_held", 0),
        stand_ins=(meta.get("env_workers") or {}).get("stand_ins", 0),
    )
    # a fault is recorded as the rollout's error, or (a reward function that raised, scored 0)
    # in its reward_errors
    failed = [r for r in rows if r.get("error") or r.get("reward_errors")]
    faulty_errors = [r for r in failed if int(r["example_id"]) in faults]
    innocent = [r for r in failed if int(r["example_id"]) not in faults]
    stats.update(
        faulty_expected=len(faults) * ROLLOUTS,
        faulty_errors=len(faulty_errors),
        innocent_errors=len(innocent),
        innocent_sample=[_describe(r) for r in innocent[:3]],
        by_fault={
            faults[int(r["example_id"])]: _describe(r)
            for r in sorted(faulty_errors, key=lambda r: r["example_id"])
        },
    )
    return stats


def _describe(row: dict) -> str:
    error = row.get("error") or (row.get("reward_errors") or [{}])[0]
    if isinstance(error, dict):
        text = f"{error.get('type', '?')}: {error.get('message', '')}"
    else:
        text = str(error)
    return f"example {row['example_id']}: {text[:150]}"


def choose_faults(n: int, seed: int) -> dict[int, str]:
    """One example per fault, spread over the dataset (the same ones every run)."""
    kinds = [*ENV_FAULTS, *ENDPOINT_FAULTS]
    picks = random.Random(seed).sample(range(n), len(kinds))
    return dict(zip(sorted(picks), random.Random(seed + 1).sample(kinds, len(kinds)), strict=True))


def main() -> None:
    stop_cleanly.install()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a fifth of the rollouts")
    parser.add_argument("-n", type=int, help="examples (default 4000; --quick 800)")
    parser.add_argument("-c", type=int, default=64, help="vf-eval's -c (default 64)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--group-timeout",
        type=float,
        default=GROUP_TIMEOUT,
        help=f"vf-eval's --group-timeout (default {GROUP_TIMEOUT:g}): on a machine so busy with "
        "other work that the fault-free run's groups pass it, a longer one",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        help="fault-free and phase 1 runs, alternated; their medians are compared (default 3; "
        "--quick 1): one pair's ratio moved 1.14-1.41x between quiet runs, the fault-free run "
        "alone by 7%%",
    )
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve({int(k): v for k, v in json.loads(args.serve).items()}, args.rate, args.seed)
        return

    from rich.console import Console
    from rich.table import Table

    n = args.n or (800 if args.quick else 4000)
    scratch = stop_cleanly.scratch_dir("vf-bench-chaos-")
    env_dir = scratch / "env"
    env_dir.mkdir()
    (env_dir / "bench_chaos.py").write_text(ENV_SOURCE)
    faults = choose_faults(n, args.seed)
    console = Console(width=160)
    console.print(
        f"{n} examples x {ROLLOUTS} rollouts, -c {args.c}, --group-timeout {args.group_timeout:g}, "
        f"VF_WORKER_MEMORY_MB={MEMORY_MB}, {os.cpu_count()} cores; faulty examples: "
        + ", ".join(f"{e} {k}" for e, k in faults.items())
    )
    plans = [
        ("fault-free", {}, 0.0, 0, 0),
        ("phase 1: faults + worker kills", faults, RANDOM_FAULT_RATE, 2 if args.quick else 5, 0),
        (
            "phase 2: + vf-eval killed, resumed",
            faults,
            RANDOM_FAULT_RATE,
            2,
            2 if args.quick else 3,
        ),
    ]
    rounds = max(1, args.rounds or (1 if args.quick else 3))
    results = []
    for k, i in enumerate([0, 1] * rounds + [2]):
        label, plan, rate, kill_workers, kill_caller = plans[i]
        if rounds > 1 and i < 2:
            label += f" ({k // 2 + 1}/{rounds})"
        endpoint_plan = {e: k for e, k in plan.items() if k in ENDPOINT_FAULTS}
        server, url = start_server(endpoint_plan, rate, args.seed + i)
        try:  # each round the same faults, the same kills at the same moments
            rng = random.Random(args.seed + 100 + i) if plan else None
            stats = measure(
                label, url, env_dir, scratch / f"run{k}", n, args.c,
                plan, rng, kill_workers, kill_caller, args.group_timeout,
            )  # fmt: skip
        finally:
            stop(server)
        stats["plan"] = i
        results.append(stats)
        console.print(f"  {label}: {stats['wall']:.1f}s", highlight=False)

    def median_of(plan: int, key: str) -> float:
        return statistics.median(s[key] for s in results if s["plan"] == plan)

    base, phase1 = median_of(0, "wall"), median_of(1, "wall")
    table = Table(title=f"chaos: vf-eval under faults ({os.cpu_count()} cores)")
    columns = (
        ("run", ""),
        ("rollouts expected", ""),
        ("recorded", ""),
        ("duplicated", "target 0"),
        ("lost", "target 0"),
        ("errors on faulty", "all"),
        ("errors on innocent", "target 0"),
        ("worker restarts", "+ forked for suspects\n+ stand-ins"),
        ("run again beside", "a held loop"),
        ("workers / vf-eval killed", ""),
        ("wall s", ""),
        ("vs fault-free", "target <= 1.3x"),
    )
    for name, target in columns:
        table.add_column(f"{name}\n({target})" if target else name, justify="right")
    for stats in results:
        ratio = stats["wall"] / base
        table.add_row(
            stats["label"],
            str(stats["expected"]),
            str(stats["recorded"]),
            str(stats["duplicated"]),
            str(stats["lost"]),
            f"{stats['faulty_errors']}/{stats['faulty_expected']}",
            str(stats["innocent_errors"]),
            f"{stats['restarts']} + {stats['isolation_workers']} + {stats['stand_ins']}"
            + (" (last run)" if stats["segments"] > 1 else ""),
            str(stats["beside_held"]),
            f"{stats['workers_killed']} / {stats['caller_kills']}",
            f"{stats['wall']:.1f}",
            f"{ratio:.2f}x" + (" (not held)" if stats["plan"] == 2 else ""),
        )
    console.print(table)
    if rounds > 1:
        console.print(
            f"phase 1 vs fault-free, medians of {rounds} alternated rounds: {phase1:.1f} s / "
            f"{base:.1f} s = {phase1 / base:.2f}x (target <= 1.3x)",
            highlight=False,
        )
    parts = Table(title="where the wall time went (seconds from the start)")
    for name in (
        "run",
        "first rollout",
        "every innocent rollout",
        "vs fault-free's last",
        "last faulty rollout",
        "vf-eval ended",
        "CPU s (all processes)",
        "CPU vs fault-free",
    ):
        parts.add_column(name, justify="right")
    base_done = median_of(0, "innocent_done") or base
    base_cpu = median_of(0, "cpu")
    for stats in results:
        parts.add_row(
            stats["label"],
            f"{stats['first_row']:.1f}",
            f"{stats['innocent_done']:.1f}",
            f"{stats['innocent_done'] / base_done:.2f}x",
            f"{stats['faulty_done']:.1f}" if stats["faulty_expected"] else "-",
            f"{stats['wall']:.1f}",
            f"{stats['cpu']:.1f}",
            f"{stats['cpu'] / base_cpu:.2f}x",
        )
    console.print(parts)
    detail = Table(title="what each faulty example's rollouts recorded (phase 1)")
    detail.add_column("fault")
    detail.add_column("error")
    for kind, text in results[1]["by_fault"].items():  # the first phase 1 run's
        detail.add_row(kind, text)
    console.print(detail)
    missed = []
    for stats in results:
        if stats["lost"] or stats["duplicated"] or stats["innocent_errors"]:
            missed.append(f"{stats['label']}: {stats['innocent_sample']}")
        if stats["faulty_errors"] != stats["faulty_expected"]:
            missed.append(f"{stats['label']}: faulty rollouts not recorded as errors")
        if stats["left"]:
            missed.append(f"{stats['label']}: {stats['left']} worker(s) outlived vf-eval")
    if phase1 > 1.3 * base:
        missed.append(f"phase 1 wall {phase1 / base:.2f}x the fault-free run's")
    for line in missed:
        console.print(f"[red]missed[/red] {line}", highlight=False)
    if not missed:
        console.print("every target met")


if __name__ == "__main__":
    main()
