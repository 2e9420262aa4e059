"""Where a request body is prepared (parsed, validated, rendered, tokenized): never on the
event loop, and never a large one in the server's own interpreter.

Bodies up to 1 MiB go to a small thread pool. Larger ones (up to the 32 MiB body limit) go, one
at a time, to a child process with its own copy of the model's ``Prompts``: parsing millions of
JSON objects holds an interpreter while it runs, and in the child that interpreter is not the
one answering other clients. The child starts on the first large body, which waits about a
second for it (a server that never sees one never pays for it); it dies with the server, and a
new one replaces it if it dies (the body it held is tried once more in the new one).

An anonymous client has one body in each lane at a time (its turn): lanes are queues, and a
client with many bodies in one would make everyone else wait for all of them. In the small lane
the thread that finishes a client's body hands its next one to the pool itself: passing the turn
through the event loop (a lock released there, the next waiter woken, its body submitted) cost
two or three turns of the loop, each waiting for the GIL behind the engine's thread, so a
client's 8 concurrent chats reached the engine one by one and were batched less (1.1-1.25x the
server CPU per request of the same requests without turns: ``benchmarks/serve_throughput.py``).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import pickle
import signal
import threading
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

from verifiers.asgi.json_api import APIError
from verifiers.processes.die_with_parent import arm_parent_death_signal
from verifiers.serve.prompts import Kind, Prepared, Prompts

LARGE_BODY = 1024 * 1024
logger = logging.getLogger("verifiers.serve")


@dataclass
class _Turn:
    """One client's place in one lane: how many of its requests hold or wait for it (at none,
    the entry goes). In the large lane its bodies take ``lock`` in turn; in the small one they
    wait in ``waiting`` (``guard``: the pool's threads pop it) while one of them is ``busy``."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
    waiting: deque[_Body] = field(default_factory=deque)
    busy: bool = False
    guard: threading.Lock = field(default_factory=threading.Lock)


@dataclass(eq=False)
class _Body:
    """A small body waiting for its client's turn, or in a thread; ``future`` is its caller's."""

    body: bytes
    kind: Kind
    future: asyncio.Future[Prepared]
    started: bool = False


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
        self.large_turn = asyncio.Lock()
        self.turns: dict[tuple[str, str], _Turn] = {}  # (client, lane)

    async def prepare(self, body: bytes, kind: Kind, client: str | None = None) -> Prepared:
        """``body`` prepared in its lane. A ``client`` (an anonymous one) has one body in each
        lane at a time (the module docstring). A body whose client hangs up while it waits for
        its turn goes at once; one already in a lane is finished first (the turn ends with it),
        so what a client left behind there is one body per lane at most."""
        if client is not None and len(body) <= LARGE_BODY:
            return await self._small_in_turn((client, "small"), body, kind)
        key = (client or "", "large")
        turn = await self._take_turn(key) if client is not None else None
        work = asyncio.create_task(self._prepare(body, kind))
        work.add_done_callback(lambda done: self._end_turn(done, key, turn))
        return await asyncio.shield(work)

    async def _small_in_turn(self, key: tuple[str, str], body: bytes, kind: Kind) -> Prepared:
        loop = asyncio.get_running_loop()
        turn = self.turns.setdefault(key, _Turn())
        turn.users += 1
        item = _Body(body, kind, loop.create_future())
        with turn.guard:
            first = item.started = not turn.busy
            turn.busy = True
            if not first:
                turn.waiting.append(item)
        if first:
            self._run_small(key, turn, item, loop)
        try:
            return await item.future
        except asyncio.CancelledError:  # its client hung up: gone at once, unless it started
            with turn.guard:
                waited = not item.started
                if waited:
                    turn.waiting.remove(item)
            if waited:
                self._leave(key, turn)
            raise

    def _run_small(
        self, key: tuple[str, str], turn: _Turn, item: _Body, loop: asyncio.AbstractEventLoop
    ) -> None:
        """``item`` to the pool (any thread); when it is done, the client's next body follows
        from the thread that did it, and ``item``'s caller is answered on the loop."""
        try:
            job = self.small.submit(self.prompts.prepare, item.body, item.kind)
        except RuntimeError as exc:  # the server is closing: the pool takes nothing more
            job = Future()
            job.set_exception(exc)
        job.add_done_callback(lambda done: self._next_small(key, turn, item, done, loop))

    def _next_small(
        self,
        key: tuple[str, str],
        turn: _Turn,
        item: _Body,
        done: Future[Prepared],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        with turn.guard:
            following = turn.waiting.popleft() if turn.waiting else None
            turn.busy = following is not None
            if following is not None:
                following.started = True
        if following is not None:
            self._run_small(key, turn, following, loop)
        try:
            loop.call_soon_threadsafe(self._answer_small, key, turn, item, done)
        except RuntimeError:  # the loop has closed: nobody waits for it
            pass

    def _answer_small(
        self, key: tuple[str, str], turn: _Turn, item: _Body, done: Future[Prepared]
    ) -> None:
        self._leave(key, turn)
        if item.future.done():  # its client hung up
            return
        if done.cancelled():
            item.future.cancel()
        elif (exc := done.exception()) is not None:
            item.future.set_exception(exc)
        else:
            item.future.set_result(done.result())

    async def _take_turn(self, key: tuple[str, str]) -> _Turn:
        turn = self.turns.setdefault(key, _Turn())
        turn.users += 1
        try:
            await turn.lock.acquire()
        except BaseException:  # its client hung up while it waited
            self._leave(key, turn)
            raise
        return turn

    def _end_turn(self, done: asyncio.Task, key: tuple[str, str], turn: _Turn | None) -> None:
        if not done.cancelled():
            done.exception()  # its client may be gone: nobody else reads its error
        if turn is not None:
            turn.lock.release()
            self._leave(key, turn)

    def _leave(self, key: tuple[str, str], turn: _Turn) -> None:
        turn.users -= 1
        if not turn.users:
            del self.turns[key]

    async def _prepare(self, body: bytes, kind: Kind) -> Prepared:
        loop = asyncio.get_running_loop()
        if len(body) <= LARGE_BODY:
            return await loop.run_in_executor(self.small, self.prompts.prepare, body, kind)
        # One body in the child at a time, so a child's death is charged to the body it held.
        # That body gets one more child: the first may have died of something else (killed,
        # or dead while idle before the pool noticed); a body that kills two is refused.
        async with self.large_turn:
            for _ in range(2):
                future = await loop.run_in_executor(self.spawner, self._submit, body, kind)
                try:
                    return await asyncio.wrap_future(future)
                except BrokenProcessPool:  # killed, out of memory: another child replaces it
                    logger.error("the process preparing large prompts died; another replaces it")
            raise APIError(
                500,
                "the process preparing this prompt died twice with it; send a smaller one",
                "server_error",
            )

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
