"""Where a request body is prepared (parsed, validated, rendered, tokenized): never on the
event loop, and never a large one in the server's own interpreter.

Bodies up to 1 MiB go to a small thread pool. Larger ones (up to the 32 MiB body limit) go, one
at a time, to a child process with its own copy of the model's ``Prompts``: parsing millions of
JSON objects holds an interpreter while it runs, and in the child that interpreter is not the
one answering other clients. The child starts on the first large body, which waits about a
second for it (a server that never sees one never pays for it); it dies with the server, and a
new one replaces it if it dies.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import pickle
import signal
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from verifiers.asgi.json_api import APIError
from verifiers.processes.die_with_parent import arm_parent_death_signal
from verifiers.serve.prompts import Kind, Prepared, Prompts

LARGE_BODY = 1024 * 1024
logger = logging.getLogger("verifiers.serve")


class PromptLanes:
    """A lane for small bodies (threads) and one for large ones (a child process)."""

    def __init__(self, prompts: Prompts) -> None:
        self.prompts = prompts
        self.small = ThreadPoolExecutor(max_workers=2, thread_name_prefix="vf-serve-prompt")
        # starts the child and hands it bodies: starting it blocks (it reads what it is sent
        # only once Python is up), and the child dies with this thread, which lives as long
        # as the server does
        self.spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vf-serve-spawner")
        self.large: ProcessPoolExecutor | None = None

    async def prepare(self, body: bytes, kind: Kind) -> Prepared:
        loop = asyncio.get_running_loop()
        if len(body) <= LARGE_BODY:
            return await loop.run_in_executor(self.small, self.prompts.prepare, body, kind)
        future = await loop.run_in_executor(self.spawner, self._submit, body, kind)
        try:
            return await asyncio.wrap_future(future)
        except BrokenProcessPool:  # it died preparing this body (killed, out of memory)
            logger.error("the process preparing large prompts died; the next body starts another")
            raise APIError(
                500,
                "the process preparing this prompt died; retry, or send a smaller one",
                "server_error",
            ) from None

    def _submit(self, body: bytes, kind: Kind) -> Future[Prepared]:
        """In the spawner thread: ``body`` to the child, started first if there is none or the
        last one died (then a fresh one takes this body)."""
        if self.large is not None:
            try:
                return self.large.submit(_prepare, body, kind)
            except BrokenProcessPool:
                pass
        self.large = ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),  # the server runs threads
            initializer=_adopt,
            initargs=(pickle.dumps(self.prompts), os.getpid()),  # bytes: read at once
        )
        return self.large.submit(_prepare, body, kind)

    def close(self) -> None:
        """At the server's end: the child is waited for (at most the body it holds), so
        nothing of it is left behind, not even its queues' semaphores."""
        self.small.shutdown(wait=False, cancel_futures=True)
        if self.large is not None:
            self.large.shutdown(wait=True, cancel_futures=True)
        self.spawner.shutdown(wait=False, cancel_futures=True)


_prompts: Prompts | None = None  # the child's copy


def _adopt(prompts: bytes, server_pid: int) -> None:
    """In the child: die with the server however it dies; keep a copy of its ``Prompts``."""
    global _prompts
    if not arm_parent_death_signal(server_pid, signal.SIGKILL):
        os._exit(1)
    _prompts = pickle.loads(prompts)


def _prepare(body: bytes, kind: Kind) -> Prepared:
    assert _prompts is not None, "the large-prompt lane runs _adopt first"
    return _prompts.prepare(body, kind)
