"""A v1 env's serving resources (``Env.serving``: each shared toolset's one tool server) held
for a classic run of it: started by the run's first rollout, reused by every later one on the
same event loop, stopped when the run ends (``TasksetEnvironment.end_run``). Under vf-eval that
is once per run in process, and once per env worker (a worker's loop lives as long as it does;
its servers are its children and die with it, ``verifiers.processes.die_with_parent``)."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack, suppress
from typing import Any


class HeldServing:
    """``env.serving()`` entered once per event loop, on demand, until ``release``."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self._held: tuple[asyncio.AbstractEventLoop, asyncio.Task[Any], AsyncExitStack] | None = (
            None
        )

    async def ready(self) -> None:
        """Wait until the servers are up (starting them for the first caller on this loop);
        a start that failed raises its error to the callers that waited on it, and the next
        caller starts them again (a worker outlives one bad moment)."""
        loop = asyncio.get_running_loop()
        if self._held is None or self._held[0] is not loop:
            stack = AsyncExitStack()
            # a task of its own: a rollout cancelled while waiting must not cancel the start
            start = loop.create_task(stack.enter_async_context(self.env.serving()))
            self._held = (loop, start, stack)
        held = self._held
        try:
            await asyncio.shield(held[1])
        except Exception:
            if self._held is held:
                self._held = None
            raise

    async def release(self) -> None:
        """Stop what ``ready`` started on this loop (nothing when it started nothing)."""
        held, self._held = self._held, None
        if held is None or held[0] is not asyncio.get_running_loop():
            return
        _, start, stack = held
        start.cancel()  # no-op when it finished
        with suppress(asyncio.CancelledError, Exception):  # its error was each rollout's
            await start
        await stack.aclose()
