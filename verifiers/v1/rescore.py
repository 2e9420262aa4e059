"""A recorded v1 episode scored again, offline: what ``vf-eval ID --rescore RUN_DIR`` does with
each line of a v1 run's ``traces.jsonl`` (upstream's ``replay``, on this SDK's rescore path).

Each trace's recorded rewards and metrics are cleared and its task's ``@metric``/``@reward``
hooks and judges run again on the saved transcript (``Task.score`` without a runtime), then the
env's ``finalize`` across the episode's traces. What cannot run offline keeps what the run
recorded, so an unchanged taskset gives back the recorded scores: a trace that errored while it
ran (no complete transcript; upstream skips it too), a trace of another task type than the
row's, and, when the task has a hook that takes the ``runtime``, the signals that hook recorded.
``Trace.state`` is not saved with a trace, so a hook that reads it sees a fresh state.
"""

from __future__ import annotations

from typing import Any

from verifiers.v1.configs.agent import WireAgentConfig
from verifiers.v1.env import Env
from verifiers.v1.episode import Episode
from verifiers.v1.state import state_cls
from verifiers.v1.task import Task, scores_in_runtime
from verifiers.v1.task_data import WireTaskData
from verifiers.v1.trace import Trace
from verifiers.v1.trace_parts import Error


def read_episode(line: str, task: Task) -> Episode[Any, Any, Any]:
    """A ``traces.jsonl`` line as an episode whose traces carry ``task``'s state type (a fresh
    one: the state is never saved), its task data read as ``WireTaskData``."""
    state_type = state_cls(type(task))
    episode: Episode[Any, Any, Any] = Episode[
        WireTaskData,
        state_type,  # type: ignore[valid-type]  # the task's own state class, known at run time
        WireAgentConfig,
    ].model_validate_json(line)
    return episode


async def rescore_trace(task: Task, trace: Trace) -> None:
    """Score ``trace`` again with ``task``'s hooks (see the module doc for what is kept)."""
    if trace.stop_condition == "error" or trace.task.type != type(task).__name__:
        return
    rewards, metrics = dict(trace.rewards), dict(trace.metrics)
    trace.rewards, trace.metrics, trace.extra_usage = {}, {}, []
    trace.info.pop("judge", None)
    try:
        await task.score(trace)
    except Exception as exc:  # a hook that raises is the trace's error, as in a live run
        trace.record_error(exc)
    if scores_in_runtime(task):  # what the runtime hooks recorded, which could not run now
        for name, reward in rewards.items():
            trace.rewards.setdefault(name, reward)
        for name, value in metrics.items():
            trace.metrics.setdefault(name, value)


async def rescore_episode(env: Env, task: Task, line: str) -> Episode[Any, Any, Any]:
    """The episode of a ``traces.jsonl`` line with every trace scored again, then the env's
    ``finalize`` across them (skipped, as in a live run, when the episode has its own error)."""
    episode = read_episode(line, task)
    for trace in episode.traces:
        await rescore_trace(task, trace)
    if not episode.errors:
        try:
            await env.finalize(task, episode)
        except Exception as exc:
            episode.errors.append(Error(type=type(exc).__name__, message=str(exc)))
    episode.ok = not episode.errors and all(t.ok for t in episode.traces)
    return episode
