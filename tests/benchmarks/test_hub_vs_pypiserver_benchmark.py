"""benchmarks/hub_vs_pypiserver.py at a tiny size: the hub and pypiserver (from the package
index, in a venv of the benchmark's own) serve the same wheels, and the table holds each
server's CPU per index request, the ratio against issue 44's target, and each client's warm
install of the same wheel (which succeeded: the benchmark stops at a failed one)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_the_pypiserver_anchor_prints_both_indexes_cpu_and_both_installs():
    tiny = ["--envs", "5", "--seconds", "1", "--rounds", "1", "--installs", "1"]
    done = subprocess.run(
        [sys.executable, "benchmarks/hub_vs_pypiserver.py", *tiny],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    if "not measured" in out:
        pytest.skip("the package index (pypiserver's) cannot be reached from here")
    for who in ("hub", r"pypiserver \(auto\)", r"pypiserver \(gunicorn\)"):
        assert re.search(rf"simple index CPU/request: {who} │\s+\d+ us \(\d+\)", out), out
    assert re.search(r"simple index: pypiserver / hub CPU │\s+[\d.]+x │\s+>= 5x", out), out
    assert re.search(r"warm `prime env install`, against the hub │\s+\d+ ms", out), out
    assert re.search(r"warm `uv pip install`, against pypiserver │\s+\d+ ms", out), out
    assert re.search(r"install: prime / uv │\s+[\d.]+x │\s+<= 1x", out), out
