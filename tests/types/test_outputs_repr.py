"""A run's results print as a summary, not every rollout: ``asyncio.run(env.evaluate(...))``
formats its result with ``repr`` on its way out (Python 3.11's ``asyncio.run`` restores its
SIGINT handler, a ``partial`` holding the main task, and ``enum`` formats that, task result
included, for an error message it then discards), which cost seconds of CPU at a few thousand
rollouts; so did printing the results."""

from __future__ import annotations

import asyncio
import signal

import verifiers as vf
from verifiers.types import State


def exact(completion, answer) -> float:
    return float(completion[-1]["content"] == answer)


def test_asyncio_run_of_an_evaluation_formats_no_rollout(server, monkeypatch):
    formatted: list[int] = []
    monkeypatch.setattr(State, "__repr__", lambda self: formatted.append(1) or "State(...)")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a main program has
    try:
        rows = [{"question": f"q{i}", "answer": f"q{i}"} for i in range(6)]
        env = vf.SingleTurnEnv(dataset=rows, rubric=vf.Rubric(funcs=[exact]))
        results = asyncio.run(env.evaluate(server.base_url, "m", rollouts_per_example=2))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert formatted == []  # asyncio.run installed its handler and formatted it on the way out
    text = repr(results)
    assert text.startswith("GenerateOutputs(12 rollouts, mean reward 1;")
    assert "state" in text and formatted == [] and str(results) == text
    assert len(results["state"]) == 12 and results["reward"] == [1.0] * 12  # the data is all there
