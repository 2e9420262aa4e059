"""vf-eval runs as the tests stop them: a real vf-eval process interrupted once some rows are
saved (a user's Ctrl-C, a scheduler's SIGTERM, a SIGKILL), to be resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from verifiers.results import read_rows


def interrupt_partway(
    cmd: list[str], output: Path, rows: int, sig: int = signal.SIGINT
) -> tuple[subprocess.Popen, str, Path]:
    """``cmd`` (a vf-eval saving under ``output``) stopped with ``sig`` once ``rows`` rows are
    saved: the process, its stderr and its run directory."""
    proc = subprocess.Popen(
        [*cmd, "--output-dir", str(output)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while True:
        runs = list((output / "evals").glob("*/*/results.jsonl"))
        if runs and len(list(read_rows(runs[0]))) >= rows:
            break
        assert time.monotonic() < deadline and proc.poll() is None, (
            proc.stderr.read() if proc.poll() is not None and proc.stderr else "timeout"
        )
        time.sleep(0.05)
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=30)
    return proc, err, runs[0].parent
