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
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
import weakref
from collections.abc import Coroutine
from contextvars import Context, ContextVar
from dataclasses import dataclass
from typing import Any

TICK_S = 0.1  # how often the loop stamps that it turned
STALL_S = 1.0  # a stamp older than this: the loop is stalled, and the worker says by whom
GROUP: ContextVar[bytes | None] = ContextVar("vf_worker_group", default=None)


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
            if previous is not None:
                task = previous(loop, coro, **kwargs)
            else:
                task = asyncio.Task(coro, loop=loop, **kwargs)
            context: Context | None = kwargs.get("context")
            group = GROUP.get() if context is None else context.get(GROUP)
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
