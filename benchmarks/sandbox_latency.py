"""Sandbox latency and density on this machine.

    python benchmarks/sandbox_latency.py [--mode auto|bwrap|landlock] [--quick]

Prints: sandbox start as a rollout sees it (``create()`` from the pool of prepared sandboxes
that SandboxEnv keeps, 4 by default: each is started ahead, with its uid, budget and disk, and
never reused), for 20 minimal rollouts one after another (create, ``print(1)``, destroy); the
cold start without a pool (p50/p90), forked from the zygote (the default as root) and, as the anchor, started
by bubblewrap itself (``zygote=False``, every sandbox before the zygote); the first sandbox of a
process, whose start includes the zygote's own; the round trip of ``print(1)`` (p50/p90/p99); snippets/s
with 16 sandboxes running concurrently, and the CPU each snippet cost there, this process's
and the sandboxes' (their workers and the snippets they reaped); idle memory per sandbox (RSS
and PSS of its processes). ``--quick`` measures a few of each (a check that it runs). Targets on 2 cores (issue 44 for the cold start and snippets/s): start p50 <= 30 ms,
cold start p50 <= 30 ms with every confinement on, round trip p50 < 5 ms, >= 1,000 snippets/s,
< 15 MiB per idle sandbox.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

import stop_cleanly  # beside this script
from rich.console import Console
from rich.table import Table

from verifiers.sandbox import LocalSandboxProvider, SandboxLimits, zygote


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    out, stack = [pid], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def cpu_s(pids: list[int]) -> float:
    """CPU seconds of these processes and of the children they reaped (a worker's snippets)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                total += sum(int(x) for x in f.read().rsplit(")", 1)[1].split()[11:15])
        except (OSError, ValueError, IndexError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


def memory_kib(pid: int, field: str) -> int:
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith(field + ":"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


async def cold_starts(mode: str, use_zygote: bool, n: int = 20) -> list[float]:
    """Wall ms of each of ``n`` cold starts (each sandbox destroyed before the next)."""
    provider = LocalSandboxProvider(
        mode=mode, pool_size=0, limits=SandboxLimits(), zygote=use_zygote
    )
    await (await provider.create()).destroy()  # the zygote is started
    cold = []
    for _ in range(n):
        t = time.perf_counter()
        box = await provider.create()
        cold.append((time.perf_counter() - t) * 1000)
        await box.destroy()
    await provider.close()
    return cold


async def run(mode: str, quick: bool = False) -> None:
    n = 5 if quick else 20
    pooled = LocalSandboxProvider(mode=mode, pool_size=4, limits=SandboxLimits())
    await pooled.warm()
    starts = []
    for _ in range(n):
        t = time.perf_counter()
        box = await pooled.create()
        starts.append((time.perf_counter() - t) * 1000)
        await box.run_python("print(1)")
        await box.destroy()
    await pooled.close()
    zygote.stop()  # the first sandbox of a process starts the zygote too
    provider = LocalSandboxProvider(mode=mode, pool_size=0, limits=SandboxLimits())
    t = time.perf_counter()
    await (await provider.create()).destroy()
    first = (time.perf_counter() - t) * 1000
    cold = await cold_starts(mode, True, n)
    exec_cold = await cold_starts(mode, False, n)
    box = await provider.create()
    for _ in range(n):
        await box.run_python("print(1)")
    trips = []
    for _ in range(30 if quick else 300):
        t = time.perf_counter()
        await box.run_python("print(1)")
        trips.append((time.perf_counter() - t) * 1000)
    await box.destroy()

    boxes = await asyncio.gather(*(provider.create() for _ in range(16)))
    await asyncio.sleep(0.5)
    rss = statistics.mean(memory_kib(b.process.pid, "Rss") for b in boxes) / 1024
    pss = statistics.mean(memory_kib(b.process.pid, "Pss") for b in boxes) / 1024
    done = 0
    stop = time.perf_counter() + (1 if quick else 5)

    async def loop(b) -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await b.run_python("print(1)")
            done += 1

    trees = [tree(b.process.pid) for b in boxes if b.process is not None]
    pids = [pid for t in trees for pid in t]
    own, theirs = time.process_time(), cpu_s(pids)
    t = time.perf_counter()
    await asyncio.gather(*(loop(b) for b in boxes))
    rate = done / (time.perf_counter() - t)
    own_us = (time.process_time() - own) / max(done, 1) * 1e6
    theirs_us = (cpu_s(pids) - theirs) / max(done, 1) * 1e6
    await provider.close()

    table = Table(title=f"local sandbox ({provider.mode})")
    for col in ("measure", "value", "target", "ok"):
        table.add_column(col, justify="right")
    rows = [
        (
            "start from the pool p50 / p90 (ms)",
            f"{pct(starts, 0.5):.1f} / {pct(starts, 0.9):.1f}",
            "p50 <= 30",
            pct(starts, 0.5) <= 30,
        ),
        (
            "cold start, no pool p50 / p90 (ms)",
            f"{pct(cold, 0.5):.1f} / {pct(cold, 0.9):.1f}",
            "p50 <= 30",
            pct(cold, 0.5) <= 30,
        ),
        (
            "  anchor: bubblewrap exec p50 / p90 (ms)",
            f"{pct(exec_cold, 0.5):.1f} / {pct(exec_cold, 0.9):.1f}",
            "",
            True,
        ),
        ("first sandbox, right after its provider (zygote start included, ms)", f"{first:.1f}", "", True),
        (
            "print(1) round trip p50 / p90 / p99 (ms)",
            f"{pct(trips, 0.5):.2f} / {pct(trips, 0.9):.2f} / {pct(trips, 0.99):.2f}",
            "p50 < 5",
            pct(trips, 0.5) < 5,
        ),
        ("snippets/s, 16 sandboxes", f"{rate:.0f}", ">= 1000", rate >= 1000),
        (
            "  CPU per snippet there, this process / the sandboxes (us)",
            f"{own_us:.0f} / {theirs_us:.0f}",
            "",
            True,
        ),
        ("idle memory per sandbox, RSS / PSS (MiB)", f"{rss:.1f} / {pss:.1f}", "< 15", pss < 15),
    ]
    for name, value, target, ok in rows:
        table.add_row(name, value, target, "yes" if ok else "NO")
    Console(width=120).print(table)
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))


def main() -> None:
    stop_cleanly.install()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mode", default="auto")
    parser.add_argument("--quick", action="store_true", help="a few of each: a check that it runs")
    args = parser.parse_args()
    asyncio.run(run(args.mode, args.quick))


if __name__ == "__main__":
    main()
