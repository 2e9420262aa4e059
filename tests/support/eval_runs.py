"""vf-eval runs as the tests drive them: a real vf-eval process interrupted once some rows are
saved (a user's Ctrl-C, a scheduler's SIGTERM, a SIGKILL), to be resumed, against a model that
answers only so many requests first (so the run cannot end before the stop); the scripted model
that solves ``vf-init --v1``'s scaffold with its tool."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verifiers.results import read_rows
from verifiers.testing import Reply

HELD_S = 3600.0  # a held reply waits this long, or until the test server stops


def answers_then_holds(
    policy: Callable[[dict[str, Any]], Reply | str], answered: int
) -> Callable[[dict[str, Any]], Reply]:
    """A model that answers the first ``answered`` requests with ``policy`` and holds every later
    one (until the test server stops): a run stopped once its first rows are saved is still
    running when the stop lands, however late a loaded machine lets the test look (a run that
    finished first was a test that raced its own model)."""
    count = itertools.count()

    def handler(request: dict[str, Any]) -> Reply:
        reply = policy(request)
        reply = reply if isinstance(reply, Reply) else Reply(content=reply)
        return reply if next(count) < answered else dataclasses.replace(reply, delay=HELD_S)

    return handler


def interrupt_partway(
    cmd: list[str], output: Path, rows: int, sig: int = signal.SIGINT
) -> tuple[subprocess.Popen, str, Path]:
    """``cmd`` (a vf-eval saving under ``output``) stopped with ``sig`` once ``rows`` rows are
    saved: the process, its stderr and its run directory. Its model should hold the requests
    past those rows (``answers_then_holds``), so that the run is still going when stopped."""
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


def add_with_the_tool(request):
    """A model that calls the scaffold's ``calc_add`` tool, then answers with its result."""
    messages = request["messages"]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if results:
        return f"The sum is {results[-1]}."
    a, b = re.search(r"What is (\d+) \+ (\d+)\?", messages[-1]["content"]).groups()
    arguments = json.dumps({"a": int(a), "b": int(b)})
    call = {
        "id": "call_0",
        "type": "function",
        "function": {"name": "calc_add", "arguments": arguments},
    }
    return Reply(tool_calls=[call])
