"""The v1-vs-classic table of ``benchmarks/eval_throughput.py`` runs to its end: the benchmark
itself asserts both paths made the same model and tool calls without errors (it broke once
when v1 toolsets moved to a server per rollout and the benchmark's did not say colocated)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_the_v1_table_compares_the_same_calls_on_both_paths():
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/eval_throughput.py",
            "--table",
            "v1",
            "--quick",
            "--repeats",
            "1",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "v1/classic client CPU per rollout" in done.stdout
    rows = [line for line in done.stdout.splitlines() if "model," in line]
    assert len(rows) == 8 and all("0/0" in row for row in rows), done.stdout
