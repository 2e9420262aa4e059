"""``benchmarks/eval_default_path.py`` runs to its end on the default path (env workers forked
from the caller), in process and on the bare loop, with every rollout kept and none failed, and
prints the process tree's peak RSS and PSS beside each side's CPU per rollout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_the_default_path_table_runs_every_side_without_errors():
    done = subprocess.run(
        [sys.executable, "benchmarks/eval_default_path.py", "--quick", "--no-anchor"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = [
        [cell.strip() for cell in line.split("│")[1:-1]]
        for line in done.stdout.splitlines()
        if " 200 " in line
    ]
    assert [row[1] for row in rows] == ["default", "in-process", "bare"] * 2, done.stdout
    # workload, side, rollouts, cpu ms/r, r/s, tree RSS MB, tree PSS MB, errors
    assert all(row[7] == "0" and float(row[6]) > 0 for row in rows), done.stdout
