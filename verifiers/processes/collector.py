"""The garbage collector's settings while a run's rollouts are in flight: one policy for every
run of the rollout engine (``run_generation``: ``evaluate``, ``generate``, ``vf-eval``, a
rescore), classic and v1 environments alike, and for the environment workers that run a run's
groups (``serve_collection``: a worker exists only to run rollouts).

A run allocates many short-lived containers per rollout (states, messages, responses, a v1
trace's records). With CPython's defaults (a young collection every 700 net allocations) the
objects of the rollouts in flight at each young collection survive it, reach the oldest
generation, and trigger full collections, each of which walks every object the process holds,
the imported modules' tens of thousands included. In profiles that was a fifth of a rollout's
client CPU. So while a run is in flight:

- the objects that existed when it started (imports, the environment, its dataset) are frozen
  out of the collector (``gc.freeze``): no collection walks them, none of them is freed by the
  collector (a reference cycle among them waits for the run's end);
- young collections come every ``RUN_YOUNG_THRESHOLD`` allocations instead of 700, so most of a
  rollout's objects are freed by reference counting before one runs.

Both are process-wide, so they are held by the outermost run only (runs nested or concurrent
in one process count), and undone when it ends, however it ends: the frozen objects go back to
the collector (into the oldest generation), the threshold back to what it was unless something
else changed it meanwhile. A process that had already frozen objects (a forked env worker,
which keeps its inherited heap frozen for copy-on-write) keeps them frozen: a run there only
raises the threshold. A process with the collector disabled is left alone.
"""

from __future__ import annotations

import functools
import gc
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

RUN_YOUNG_THRESHOLD = 10_000
"""Net allocations between young collections while a run is in flight (CPython's default: 700)."""

_lock = threading.Lock()
_runs = 0
_restore: tuple[tuple[int, ...], tuple[int, ...], bool] | None = None
"""While a run holds the policy: the thresholds it found, those it set, whether it froze."""


def _enter() -> None:
    global _runs, _restore
    with _lock:
        _runs += 1
        if _runs > 1 or not gc.isenabled():
            return
        found = gc.get_threshold()
        mine = (max(found[0], RUN_YOUNG_THRESHOLD), *found[1:])
        gc.set_threshold(*mine)
        froze = gc.get_freeze_count() == 0
        if froze:
            gc.freeze()
        _restore = (found, mine, froze)


def _exit() -> None:
    global _runs, _restore
    with _lock:
        _runs -= 1
        if _runs > 0 or _restore is None:
            return
        found, mine, froze = _restore
        _restore = None
        if gc.get_threshold() == mine:
            gc.set_threshold(*found)
        if froze:
            gc.unfreeze()


@contextmanager
def run_collection() -> Iterator[None]:
    """Hold the run's collector policy (module docstring) for the body, undone on any exit."""
    _enter()
    try:
        yield
    finally:
        _exit()


def serve_collection(freeze: bool = False) -> None:
    """A serving process's collector for its life: young collections every
    ``RUN_YOUNG_THRESHOLD`` allocations, as in a run. An environment worker's heap as it was
    forked is frozen already (``verifiers.workers.forked``), and one launched from a fresh
    interpreter (a template's) gets the threshold the same way, which inheriting the caller's
    setting never gave it. ``freeze``: a server that built its state before its first request
    (the hub) freezes it too, so no full collection walks it while requests wait on the loop
    (at 10,000 environments one took ~50 ms of the hub's loop)."""
    if gc.isenabled():
        if freeze:
            gc.freeze()
        found = gc.get_threshold()
        gc.set_threshold(max(found[0], RUN_YOUNG_THRESHOLD), *found[1:])


P = ParamSpec("P")
R = TypeVar("R")


def collects_as_a_run(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """``fn`` (a coroutine function running a whole run) under ``run_collection``."""

    @functools.wraps(fn)
    async def run(*args: P.args, **kwargs: P.kwargs) -> R:
        with run_collection():
            return await fn(*args, **kwargs)

    return run
