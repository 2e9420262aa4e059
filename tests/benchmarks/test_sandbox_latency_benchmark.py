"""benchmarks/sandbox_latency.py at a tiny size (``--quick``): every row of its table is printed
with a number, the cold start beside its anchor (bubblewrap itself), and the CPU a snippet cost
with 16 sandboxes, this process's and the sandboxes'. (The numbers against their targets are
the benchmark's to judge, in a full run on a quiet machine.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.sandboxes import available_modes

REPO = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not [m for m in available_modes() if isinstance(m, str)], reason="no sandbox mode here"
    ),
]
NUMBER = r"([\d.]+)"


def test_the_sandbox_benchmark_prints_every_row_with_the_anchor_beside_the_cold_start():
    done = subprocess.run(
        [sys.executable, "benchmarks/sandbox_latency.py", "--quick"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    pairs = {
        "start from the pool p50 / p90 (ms)": 2,
        "cold start, no pool p50 / p90 (ms)": 2,
        "anchor: bubblewrap exec p50 / p90 (ms)": 2,
        "print(1) round trip p50 / p90 / p99 (ms)": 3,
        "CPU per snippet there, this process / the sandboxes (us)": 2,
        "idle memory per sandbox, RSS / PSS (MiB)": 2,
    }
    for name, count in pairs.items():
        row = re.search(re.escape(name) + r" │\s+" + " / ".join([NUMBER] * count) + " │", out)
        assert row, f"no row {name!r} in:\n{out}"
        values = [float(v) for v in row.groups()]
        if "p50" in name:  # percentiles, in order
            assert values == sorted(values), row
    rate = re.search(r"snippets/s, 16 sandboxes │\s+(\d+) │\s+>= 1000 │ (yes|NO)", out)
    assert rate and int(rate.group(1)) > 0, out
    cpu = re.search(r"this process / the sandboxes \(us\) │\s+(\d+) / (\d+)", out)
    assert cpu and int(cpu.group(2)) > 0, out  # a snippet's fork and run are the sandbox's
    assert re.search(r"load average: [\d.]+", out), out
