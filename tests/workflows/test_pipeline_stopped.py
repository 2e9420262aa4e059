"""The post-training pipeline for real (examples/pipeline/uppercase_cpu.sh at its smallest scale,
the embedded model, every stage's own command), stopped as a terminal stops it and rerun as its
header says: the stage that was stopped goes on where it was, nothing finished is redone, and the
finished pipeline holds what an uninterrupted one holds (the script's logic at every stage, with
each command replaced, is tests/workflows/test_scripts.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
STAGES = [
    "eval base",
    "generate 8 x 8",
    "vf-data best-of-8",
    "vf-sft",
    "eval sft",
    "vf-rl 2 steps",
    "eval sft+rl",
]


def start(out: Path, home: Path) -> subprocess.Popen:
    env = {**os.environ, "PIPELINE_SCALE": "0.01", "PIPELINE_DIR": str(out), "HOME": str(home)}
    return subprocess.Popen(
        ["bash", "examples/pipeline/uppercase_cpu.sh"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )


def done_stages(out: Path) -> list[str]:
    timings = out / "stages.tsv"
    if not timings.exists():
        return []
    return [line.split("\t")[0] for line in timings.read_text().splitlines()]


def stop_when(proc: subprocess.Popen, ready, sig: signal.Signals) -> str:
    """Send ``sig`` to the pipeline's process group (Ctrl-C, or a closed session) once
    ``ready()`` holds; then every process it started must be gone."""
    seen: dict[int, psutil.Process] = {}
    deadline = time.monotonic() + 600
    while not ready():
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert time.monotonic() < deadline, "the stage never began"
        for child in psutil.Process(proc.pid).children(recursive=True):
            seen.setdefault(child.pid, child)
        time.sleep(0.2)
    for child in psutil.Process(proc.pid).children(recursive=True):
        seen.setdefault(child.pid, child)
    os.killpg(proc.pid, sig)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, output
    # A process the stop reached may still be in the kernel's exit path (running, its memory
    # and command line already gone) when the script's shell is reaped: gone means gone soon.
    _, left = psutil.wait_procs(list(seen.values()), timeout=30)
    left = [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert left == [], [(p.pid, p.name(), p.cmdline()) for p in left]
    return output


def rows_of(run_parent: Path) -> tuple[Path, list[dict]]:
    (results,) = run_parent.glob("evals/*/*/results.jsonl")
    return results.parent, [json.loads(line) for line in results.read_text().splitlines()]


def test_the_pipeline_stopped_in_generation_and_in_rl_goes_on_from_where_it_was(tmp_path):
    out, home = tmp_path / "pipeline", tmp_path / "home"
    home.mkdir()

    def generating() -> bool:
        try:
            return len(rows_of(out / "generate")[1]) >= 8
        except ValueError:  # no run yet
            return False

    first = stop_when(start(out, home), generating, signal.SIGTERM)
    assert done_stages(out) == ["eval base"], first
    run, rows = rows_of(out / "generate")
    assert 8 <= len(rows) < 64

    def training() -> bool:
        return (out / "rl" / "config.json").exists() and "vf-rl 2 steps" not in done_stages(out)

    second = stop_when(start(out, home), training, signal.SIGINT)
    assert "== eval base: done already" in second
    assert done_stages(out) == STAGES[:5], second
    resumed, rows = rows_of(out / "generate")
    assert resumed == run  # resumed in place, not redone
    keys = [(r["example_id"], r["rollout_index"]) for r in rows]
    assert sorted(keys) == sorted({(e, i) for e in {k[0] for k in keys} for i in range(8)})
    assert len(keys) == 64
    assert json.loads((run / "metadata.json").read_text())["split"] == "train"

    last = start(out, home)
    output, _ = last.communicate(timeout=900)
    assert last.returncode == 0, output
    for stage in STAGES[:5]:
        assert f"== {stage}: done already" in output
    assert done_stages(out) == STAGES
    assert (out / "rl" / "weights").is_dir()
    for label in ("base", "sft", "rl"):  # each held-out eval: the same 8 rows, once each
        _, held = rows_of(out / f"eval-{label}")
        assert sorted(r["example_id"] for r in held) == sorted({r["example_id"] for r in held})
        assert len(held) == 8
    assert "SFT+RL" in output
