"""benchmarks/hub.py at a tiny size: the hub is seeded through its publish service (the seeded
versions are served like pushed ones) and both push protocols are replayed over HTTP against it,
each push succeeding, with the hub's CPU per push and the official/native ratio printed (less the
hub's idle rate, and as measured)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_the_hub_benchmark_seeds_its_hub_and_prints_both_push_protocols_costs():
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/hub.py",
            *("--clients-only", "--envs", "30", "--versions", "2"),
            *("--pushes", "10", "--repeats", "0"),  # enough CPU to count in 10 ms ticks
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    # 60 versions: 15 pushed over HTTP at each end, 30 seeded (the run checks the hub serves them)
    assert re.search(r"versions seeded \(setup\) │\s+60 in \d+ s", out), out
    native = re.search(
        r"native push protocol, replayed: wall / hub CPU │\s+\d+ ms / -?[\d.]+ ms \(([\d.]+)\)", out
    )
    staged = re.search(
        r"official push protocol, replayed: wall / hub CPU │\s+\d+ ms / -?[\d.]+ ms \(([\d.]+)\)",
        out,
    )
    assert native and staged, out
    # the ratio of the CPU less the hub's idle rate, and (in brackets) of the CPU as measured
    ratio = r"push protocol, official / native: hub CPU │\s+-?[\d.]+x \([\d.]+x\) │\s+<= 1.5x"
    assert re.search(ratio, out), out
