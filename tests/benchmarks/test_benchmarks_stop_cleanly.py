"""A benchmark stopped by SIGTERM at a random moment leaves no process and no temp dir behind
(a TRL trainer went on at 99% CPU; PostgreSQL, moto and hubs, and hundreds of MB in /tmp, were
left by others)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

CASES = {
    "hub": ["benchmarks/hub.py", "--envs", "300", "--seconds", "4"],
    "env_workers": ["benchmarks/env_workers.py", "--quick"],
    "serve_throughput": ["benchmarks/serve_throughput.py", "--repeats", "3"],
}


def started_by(root: psutil.Process, seen: dict[int, psutil.Process]) -> dict[int, psutil.Process]:
    """Every process ``root`` started so far (servers in sessions of their own too)."""
    try:
        for child in root.children(recursive=True):
            seen.setdefault(child.pid, child)
    except psutil.Error:
        pass
    return seen


def running(procs: dict[int, psutil.Process]) -> list[psutil.Process]:
    alive = []
    for proc in procs.values():
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.Error:
            continue
    return alive


@pytest.mark.parametrize("case", list(CASES))
def test_a_benchmark_stopped_by_sigterm_leaves_nothing(case, tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.Popen(
        [sys.executable, *CASES[case]],
        cwd=REPO,
        env={**os.environ, "TMPDIR": str(scratch)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own session: every process it starts is counted
    )
    root, seen = psutil.Process(proc.pid), {}
    try:
        deadline = time.monotonic() + 120
        while not started_by(root, seen) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.05)
        assert seen, "it never started a child"
        stop_at = time.monotonic() + random.uniform(0.2, 2.0)  # somewhere in its work
        while time.monotonic() < stop_at and proc.poll() is None:
            started_by(root, seen)
            time.sleep(0.05)
        # on a busy machine a benchmark may end by itself first (a target it reports missed, a
        # server slow to start): then its own exit must leave nothing either
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 15
        while running(seen) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [p.cmdline() for p in running(seen)] == []
        assert list(scratch.iterdir()) == []
    finally:
        for left in running(seen):
            left.kill()
