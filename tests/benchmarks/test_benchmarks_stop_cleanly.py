"""A benchmark or a long script stopped by SIGTERM or SIGINT at a random moment leaves no process
and no temp dir behind (a TRL trainer went on at 99% CPU; PostgreSQL, moto and hubs, and hundreds
of MB in /tmp, were left by others)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

HELPERS = {"stop_cleanly", "cpu_ab"}  # modules the benchmarks beside them import
BENCHMARKS = sorted(p.stem for p in (REPO / "benchmarks").glob("*.py") if p.stem not in HELPERS)
SMALL = {  # arguments that keep a run short; the stop comes long before the end anyway
    "hub": ["--envs", "300", "--seconds", "4"],
    "hub_vs_pypiserver": ["--envs", "20", "--seconds", "2", "--rounds", "1", "--installs", "1"],
    "env_workers": ["--quick"],
    "eval_default_path": ["--quick", "--no-anchor"],
    "chaos": ["-n", "20"],
    "serve_throughput": ["--repeats", "3"],
    "report": ["--rollouts", "2000"],
    "trainer": ["--steps", "3"],
    "trainer_vs_trl": ["--steps", "2"],
    "weight_transport": ["--repeats", "2"],
    "vf_eval_end_to_end": ["--no-anchor", "--runs", "1", "-n", "20"],
}
CASES = {name: [f"benchmarks/{name}.py", *SMALL.get(name, [])] for name in BENCHMARKS}


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


def test_every_benchmark_installs_the_clean_stop_first():
    """Without ``stop_cleanly.install()`` SIGTERM ends Python at once and nothing is cleaned."""
    for name in BENCHMARKS:
        text = (REPO / "benchmarks" / f"{name}.py").read_text()
        main = text.split("\ndef main(", 1)
        assert len(main) == 2, f"{name}: no main()"
        body = [line.strip() for line in main[1].splitlines()[1:] if line.strip()]
        first = next(line for line in body if not line.startswith(('"""', "#")))
        assert first == "stop_cleanly.install()", f"{name}: main() starts with {first!r}"


def began(root: psutil.Process, seen: dict, scratch: Path) -> bool:
    """It has begun its work: a child started (a server, a measured subprocess), or it made
    its scratch directory (a benchmark measuring in process)."""
    return bool(started_by(root, seen)) or any(scratch.iterdir())


SIGNALS = pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])


@SIGNALS
@pytest.mark.parametrize("case", list(CASES))
def test_a_benchmark_stopped_by_a_signal_leaves_nothing(case, sig, tmp_path):
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
        while not began(root, seen, scratch) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.05)
        assert began(root, seen, scratch), "it never began its work"
        stop_at = time.monotonic() + random.uniform(0.2, 2.0)  # somewhere in its work
        while time.monotonic() < stop_at and proc.poll() is None:
            started_by(root, seen)
            time.sleep(0.05)
        # on a busy machine a benchmark may end by itself first (a target it reports missed, a
        # server slow to start): then its own exit must leave nothing either
        if proc.poll() is None:
            proc.send_signal(sig)
        proc.wait(timeout=90)  # stop_cleanly ends it UNWIND_S after the signal at the latest
        deadline = time.monotonic() + 15
        while running(seen) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [p.cmdline() for p in running(seen)] == []
        assert list(scratch.iterdir()) == []
    finally:
        for left in running(seen):
            left.kill()


@SIGNALS
def test_publish_library_stopped_by_a_signal_leaves_no_process_and_no_work_dir(
    sig, tmp_path, request
):
    """scripts/publish_library.sh starts a hub, then pushes, installs and evaluates in the
    foreground: a SIGTERM or SIGINT at any of those stops every process it started, and the
    temporary work dir it made (563 MB after a full run) is removed."""
    # a short TMPDIR: the hub's forkserver binds a Unix socket under it (108 bytes at most), and
    # an xdist worker's tmp_path is too long for that (the hub exits)
    scratch = Path(tempfile.mkdtemp(prefix="pl-", dir="/tmp"))
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    said = tmp_path / "stdout"
    with said.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", "scripts/publish_library.sh"],
            cwd=REPO,
            env={**os.environ, "TMPDIR": str(scratch), "ENVS": "reverse_text"},
            stdout=out,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    root, seen = psutil.Process(proc.pid), {}

    try:
        # the hub is up and its user made: what follows runs in the foreground (a push of a
        # second or less, then the model server, the venv, installs, evals); a process seen
        # by polling would miss a push that ends between two looks
        deadline = time.monotonic() + 300
        while b"publish_library: hub at" not in said.read_bytes():
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the hub never came up"
            started_by(root, seen)
            time.sleep(0.05)
        time.sleep(random.uniform(0.0, 2.0))
        started_by(root, seen)
        if proc.poll() is None:
            proc.send_signal(sig)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 15
        while running(seen) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert [p.cmdline() for p in running(seen)] == []
        assert list(scratch.iterdir()) == []
    finally:
        for left in running(seen):
            left.kill()
