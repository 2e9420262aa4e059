"""Server CPU per request, bounds on against bounds off, interleaved (imported by the benchmarks
beside it).

On a shared machine a server's wall-clock throughput says mostly how busy everyone else is, so
what a bound costs is measured as the CPU time the server process spends per request (all its
threads, not its children: ``psutil``), which other jobs change far less. The two servers run
side by side and take turns, A B then B A each round, so a drift in the machine's speed falls on
both; each side's figure is the median of its rounds.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

TARGET = 1.05
"""The bounds may cost at most 5% of a request's server CPU."""


def process_cpu(pid: int) -> float:
    """CPU seconds the process ``pid`` has used so far, every live thread's. Linux's scheduler
    counts them in nanoseconds (``/proc/PID/task/*/schedstat``); ``psutil``'s user and system
    times come in 10 ms ticks, too coarse for a batch of cheap requests. (A thread that ended
    takes its time with it there: the servers measured keep theirs.)"""
    total, found = 0, False
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[0])
            found = True
        except (OSError, IndexError, ValueError):  # the thread ended meanwhile
            pass
    if found:
        return total / 1e9
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


@dataclass
class Side:
    """One server of a comparison: its process and a batch of requests sent to it (returning
    how many it sent, each answered before it returns)."""

    pid: int
    batch: Callable[[], int]
    per_request: list[float] = field(default_factory=list)

    def measure(self) -> None:
        before = process_cpu(self.pid)
        count = self.batch()
        self.per_request.append((process_cpu(self.pid) - before) / count)


def interleaved(on: Side, off: Side, rounds: int) -> tuple[float, float]:
    """Both sides measured ``rounds`` times, taking turns (on, off; then off, on; ...): the
    median server CPU seconds per request of each."""
    for turn in range(rounds):
        first, second = (on, off) if turn % 2 == 0 else (off, on)
        first.measure()
        second.measure()
    return statistics.median(on.per_request), statistics.median(off.per_request)


def bounds_row(name: str, on: float, off: float) -> tuple[str, str, str, str, str]:
    """A table row: CPU per request with and without the bounds (ms), their ratio, the target
    and whether it is met."""
    ratio = on / off if off > 0 else float("inf")
    return (
        name,
        f"{on * 1e3:.3f}",
        f"{off * 1e3:.3f}",
        f"{ratio:.3f}x",
        f"<= {TARGET:.2f}x ({'yes' if ratio <= TARGET else 'NO'})",
    )


BOUNDS_COLUMNS = (
    "request",
    "bounds on: ms CPU/request",
    "bounds off",
    "on / off",
    "target",
)
