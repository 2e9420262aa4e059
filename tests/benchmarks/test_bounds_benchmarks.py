"""The bounds' tables of benchmarks/serve_throughput.py and benchmarks/env_workers.py at a small
size: each runs the real server (vf-serve, vf-env-server) beside the same command built without
its bounds, and prints a row per workload with the server CPU per request of each and their
ratio. (The ratios themselves are the benchmarks' to judge, on a quiet machine: CPU time on a
shared one still moves by ~10%.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
ROW = r"{} │\s+([\d.]+) │\s+([\d.]+) │\s+([\d.]+)x │\s+<= 1.05x \((?:yes|NO)\)"


def bounds_rows(script: str, names: list[str]) -> list[tuple[float, float, float]]:
    done = subprocess.run(
        [sys.executable, f"benchmarks/{script}", "--bounds-only", "--quick"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = []
    for name in names:
        found = re.search(ROW.format(re.escape(name)), done.stdout)
        assert found, f"no row {name!r} in:\n{done.stdout}"
        on, off, ratio = map(float, found.groups())
        assert on > 0 and off > 0
        rounding = on / off * (0.0005 / on + 0.0005 / off) + 0.0005  # printed to 3 places
        assert ratio == pytest.approx(on / off, abs=rounding)
        rows.append((on, off, ratio))
    return rows


def test_the_env_server_benchmark_prints_what_its_bounds_cost_per_request():
    rows = bounds_rows(
        "env_workers.py",
        [
            "health ping (pipelined)",
            "one-rollout group (256 a batch)",
            "2 MiB run_group, refused after validation",
            "2 MiB frame, refused at its 2nd byte (relay)",
        ],
    )
    health, group, large, _ = rows
    assert health[0] < group[0] < large[0]  # each workload costs what it does


def test_the_serve_benchmark_prints_what_its_bounds_cost_per_request():
    rows = bounds_rows(
        "serve_throughput.py",
        [
            "chat, 1 token, 8 at a time",
            "chat, 32 tokens, 8 at a time",
            "GET /v1/models (no model work)",
        ],
    )
    one_token, tokens_32, models = rows
    assert models[0] < one_token[0] < tokens_32[0]
