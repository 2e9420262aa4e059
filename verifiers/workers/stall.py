"""Which group holds a worker's event loop when the loop stops turning.

A group whose own code blocks (a sync reward or tool that sleeps or loops without awaiting)
stops its worker's event loop: nothing there can time it out or answer, and a pool that kills
the stuck worker cannot tell which of its groups was to blame; it ran each of them again alone
to find out, which cost the culprit's time limit a second time (half a chaos run's tail). So the
worker says which: a callback on the loop stamps the time every ``TICK_S``; a thread that sees
the stamp older than ``STALL_S`` names the task the loop is running by the group whose request
created it (each task is recorded, as it is created, with the group of the context it was
created in: a request's task, and every task its code starts). While the loop is stalled the
thread writes ``{"since", "seen", "group"}`` to ``stall_path(heartbeat)`` (replaced whole, so
never read half-written), and removes it once the loop turns again. ``group`` is null when the
evidence is ambiguous: no task runs (a plain callback blocks), the task belongs to no request,
or the task seen changed during the stall. The pool reads it (``read_stall``) when a group
outlives its time limit (``verifiers.workers.isolation``).

Memory is the other thing a group's code can do that no thread of the worker can name: one
allocation (``b"x" * 2**31``, a numpy array) holds the interpreter lock while it grows the
worker past its budget, so neither this thread nor the loop can say anything until it ends, and
the pool, which kills it, could only find the grower by running the groups again in halves (a
death each). Two things name it all the same: every task a request's code starts runs its
coroutine under a frame named for that group (``vf_group_<hex id>``: one frame more in its
tracebacks, under a microsecond per task, nothing per step that shows), and
``watch_growth`` asks ``faulthandler`` to write
every thread's Python frames to ``frames_path(heartbeat)`` on ``GROWN_SIGNAL``: a C handler
that needs no lock, so it answers while the allocation still runs. The pool sends that signal
when it finds the worker over its budget and reads the group off the dump (``read_grower``)
before it kills the worker: that group runs alone first. Word, not proof: the group running
when the budget was crossed may not be the one holding the memory (another's slow leak), so it
is tried alone, never convicted on the word.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import functools
import inspect
import json
import os
import re
import signal
import threading
import time
import types
import weakref
from collections.abc import Coroutine
from contextvars import Context, ContextVar
from dataclasses import dataclass
from typing import Any

TICK_S = 0.1  # how often the loop stamps that it turned
STALL_S = 1.0  # a stamp older than this: the loop is stalled, and the worker says by whom
GROUP: ContextVar[bytes | None] = ContextVar("vf_worker_group", default=None)
# what the pool sends a worker over its memory budget: "write every thread's frames now" (a
# real-time signal where there are some: no library of a worker's is likely to use one)
GROWN_SIGNAL = signal.SIGRTMIN + 4 if hasattr(signal, "SIGRTMIN") else signal.SIGUSR2
_GROUP_FRAME = re.compile(rb" in vf_group_((?:[0-9a-f]{2})+)\n")  # whole lines, whole bytes


@dataclass(frozen=True)
class Stall:
    """The worker's word: its loop has not turned since ``since``, still so at ``seen`` (both
    ``time.monotonic()``, one clock for every process here), running ``group``'s code (None:
    no one request's, as far as it can tell)."""

    since: float
    seen: float
    group: bytes | None


def stall_path(heartbeat: str) -> str:
    """Where the worker with this heartbeat file reports a stall."""
    return f"{heartbeat}.stall"


def frames_path(heartbeat: str) -> str:
    """Where the worker with this heartbeat file writes its frames on ``GROWN_SIGNAL``."""
    return f"{heartbeat}.frames"


def watch_growth(path: str) -> None:
    """On ``GROWN_SIGNAL``, write every thread's frames to ``path`` (appended; from a C
    handler, while any code runs, an allocation holding the interpreter lock too)."""
    frames = open(path, "ab")  # faulthandler keeps it open, for the process's life
    faulthandler.register(GROWN_SIGNAL, file=frames, all_threads=True, chain=False)


def read_grower(path: str) -> tuple[int, bytes | None]:
    """What the frames at ``path`` say: their size (0: none written yet) and the one group
    whose frame is on some thread's stack (None: none, or more than one)."""
    try:
        with open(path, "rb") as f:
            dump = f.read()
    except OSError:
        return 0, None
    groups = {bytes.fromhex(found.decode()) for found in _GROUP_FRAME.findall(dump)}
    return len(dump), groups.pop() if len(groups) == 1 else None


async def _in_group(coro: Coroutine[Any, Any, Any]) -> Any:
    return await coro


@functools.lru_cache(maxsize=1024)  # a group's tasks share one (a few microseconds each)
def _runner_for(group: bytes) -> Any:
    name = f"vf_group_{group.hex()}"
    code = _in_group.__code__.replace(co_name=name, co_qualname=name)
    return types.FunctionType(code, _in_group.__globals__, name)


def _named_for(group: bytes, coro: Coroutine[Any, Any, Any]) -> Coroutine[Any, Any, Any]:
    """``coro`` under one frame named for ``group``, which a dump of the stack shows."""
    return _runner_for(group)(coro)


def read_stall(path: str) -> Stall | None:
    """The stall reported at ``path``, None when none is (or it cannot be read)."""
    try:
        with open(path, "rb") as f:
            report = json.loads(f.read())
        group = report["group"]
        return Stall(
            since=float(report["since"]),
            seen=float(report["seen"]),
            group=bytes.fromhex(group) if group is not None else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class LoopWatch:
    """Watches the running loop of the worker whose stall file is ``path`` (``start`` on it)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.turned = time.monotonic()  # when the loop last stamped
        self._owners: weakref.WeakKeyDictionary[asyncio.Task[Any], bytes] = (
            weakref.WeakKeyDictionary()
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped = threading.Event()

    def start(self) -> None:
        """Record each task's group from now on, stamp, and watch (from a daemon thread)."""
        loop = self._loop = asyncio.get_running_loop()
        previous = loop.get_task_factory()

        def factory(
            loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
        ) -> asyncio.Future[Any]:
            # kwargs: what create_task passes on (context; name and eager_start on 3.12+)
            context: Context | None = kwargs.get("context")
            group = GROUP.get() if context is None else context.get(GROUP)
            if group is not None and inspect.iscoroutine(coro):
                coro = _named_for(group, coro)  # a dump of the stack names the group
            if previous is not None:
                task = previous(loop, coro, **kwargs)
            else:
                task = asyncio.Task(coro, loop=loop, **kwargs)
            if group is not None and isinstance(task, asyncio.Task):
                self._owners[task] = group
            return task

        loop.set_task_factory(factory)  # type: ignore[arg-type]
        self._stamp()
        threading.Thread(target=self._watch, name="vf-worker-stall-watch", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()

    def _stamp(self) -> None:
        self.turned = time.monotonic()
        assert self._loop is not None
        if not self._stopped.is_set():
            self._loop.call_later(TICK_S, self._stamp)

    def _watch(self) -> None:
        since: float | None = None  # the stall reported, by the stamp it started after
        group: bytes | None = None
        while not self._stopped.wait(TICK_S):
            turned, now = self.turned, time.monotonic()
            if now - turned < STALL_S:
                if since is not None:
                    since = None
                    with contextlib.suppress(OSError):
                        os.remove(self.path)
                continue
            task = asyncio.current_task(self._loop)  # the one it runs (read from here)
            running = self._owners.get(task) if task is not None else None
            if since != turned:  # a new stall
                since, group = turned, running
            elif group != running:  # another task ran meanwhile: no one group is to blame
                group = None
            self._report(Stall(since=turned, seen=now, group=group))
        with contextlib.suppress(OSError):
            os.remove(self.path)

    def _report(self, stall: Stall) -> None:
        report = {
            "since": stall.since,
            "seen": stall.seen,
            "group": stall.group.hex() if stall.group is not None else None,
        }
        partial = f"{self.path}.{os.getpid()}.tmp"
        with contextlib.suppress(OSError):
            with open(partial, "w") as f:
                json.dump(report, f)
            os.replace(partial, self.path)
