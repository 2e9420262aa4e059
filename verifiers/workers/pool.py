"""A pool of environment worker processes on this machine.

Requests go to the least busy live worker. A thread outside the event loop checks the workers
every quarter second (so a blocked loop cannot hide a dead worker): a worker that exited
(crashed, segfaulted, was killed, ran out of memory) is replaced.

Faults cost only their own. The groups a dead worker was running are not guilty: they become
*suspects* and are each run again alone, one at a time on a worker reserved for them (the
others keep running the rest), before anyone's last attempt is spent. A group that kills a
worker while it runs alone has a strike; one with more strikes than ``retries`` is the culprit
and is answered with an error naming the cause (exit code, signal), which the caller records on
each of its rollouts. A group that runs past its timeout (plus a grace period for the worker to
answer it) gets its worker killed and replaced, since a worker that cannot answer is stuck; stuck
(or over the memory budget) while alone, it is the culprit at once, its limit being its own. A
worker that dies while the pool starts is replaced as at any other time.
Workers that die again and again are restarted with a growing pause, and after
``max_deaths_in_a_row`` deaths with no group answered in between the pool stops restarting them
and answers every group with that error. Closing the pool stops the workers; they also die with
the caller however it dies (``verifiers.workers.process``).

Over 400 lines, not split: one class whose dispatch, reply handling, death handling and
isolation of suspects all read and change the same worker and request tables; apart, each
piece would need the others' invariants spelled out again.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifiers.errors import EnvWorkerError
from verifiers.processes.leftovers import owned_dir, remove_abandoned
from verifiers.workers.forked import Template, WorkerProcess, can_fork
from verifiers.workers.process import BEAT, FAILED, READY, read_beat
from verifiers.workers.protocol import Response, RunGroupRequest, pack, unpack

logger = logging.getLogger("verifiers.workers")
TIMEOUT_GRACE = 30.0
WORK_DIR_PREFIX = "vf-workers-"
_ids = itertools.count()


@dataclass
class _Worker:
    slot: int
    identity: bytes
    process: WorkerProcess
    heartbeat: str  # the file it writes its heartbeat to
    ready: asyncio.Future[bool]
    inflight: set[bytes] = field(default_factory=set)
    dead: bool = False
    reserved: bool = False  # runs suspects only, one at a time
    stuck: str | None = None  # why the pool killed it, when it did
    release: str | None = None  # the release it said it loaded the environment as
    load_failed: bool = False  # said it could not load the environment (not replaced)

    def idle(self) -> bool:
        return (
            not self.dead and not self.inflight and self.ready.done() and not self.ready.exception()
        )

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class _Pending:
    request_id: bytes
    payload: bytes
    future: asyncio.Future[Response]
    attempts: int = 0  # workers it killed while running alone
    worker: _Worker | None = None
    suspect: bool = False  # in a worker that died beside others: runs alone from now on
    started: float | None = None  # when a worker began running it (loop time), if one is


class WorkerPool:
    """``num_workers`` processes, each running ``vf.load_environment(env_id, **env_args)``.

    Args:
        release: the classic release the environment is built with (``verifiers.classic``).
        retries: how many more times a group that killed a worker while running alone is run
            again (alone) before it is the culprit.
        hang_timeout: seconds without a heartbeat after which a worker is killed as hung.
        max_deaths_in_a_row: worker deaths with no group answered in between after which
            the pool stops restarting workers.
        memory_limit_mb: a worker's resident memory past which it is replaced (its groups
            handled as on any death: the one that grew it, run alone, is the culprit), before
            the OOM killer takes the machine; default ``$VF_WORKER_MEMORY_MB``, else 80% of
            this machine's memory shared among the workers.
    """

    def __init__(
        self,
        env_id: str,
        env_args: dict[str, Any] | None = None,
        num_workers: int = 1,
        *,
        release: str | None = None,
        retries: int = 1,
        start_timeout: float = 600.0,
        hang_timeout: float = 60.0,
        max_deaths_in_a_row: int | None = None,
        memory_limit_mb: int | None = None,
    ) -> None:
        if num_workers < 1:
            raise ValueError(
                f"an environment worker pool needs at least one worker, got {num_workers}"
            )
        self.env_id, self.env_args = env_id, dict(env_args or {})
        self.num_workers, self.release, self.retries = num_workers, release, retries
        self.start_timeout, self.hang_timeout = start_timeout, hang_timeout
        self.restarts = 0
        self.isolated = 0  # suspects run alone
        self.max_deaths_in_a_row = max_deaths_in_a_row or 4 * num_workers + 8
        self.memory_limit_mb = memory_limit_mb or default_memory_limit_mb(num_workers)
        self._deaths_in_a_row = 0
        self._start_deaths = 0  # workers that died before they were ready
        self._broken: str | None = None  # why the pool stopped restarting workers
        self._workers: list[_Worker] = []
        self._pending: dict[bytes, _Pending] = {}
        self._waiting: list[_Pending] = []
        self._suspects: list[_Pending] = []
        self._closing = False
        self._dir = ""  # made by start(): the socket and the heartbeats
        self.address = ""
        self._ctx: Any = None
        self._router: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._receiver: asyncio.Task[None] | None = None
        self._watcher: threading.Thread | None = None
        # processes started by launch(), before start() had an event loop to wait on them
        self._launched: list[tuple[int, bytes, WorkerProcess, str]] = []
        self._template: Template | None = None  # what launch() forked them from

    # --- lifecycle -------------------------------------------------------------------------------
    def launch(self) -> WorkerPool:
        """Start the worker processes now, without waiting for them: they load the environment
        while the caller goes on (vf-eval calls this first thing, before it loads the
        environment itself); ``start()`` then waits for them, and ``abandon()`` ends them if it
        never comes to that. A worker launched before the caller knew the environment's release
        loads it as its package says, and ``start()`` refuses one that differs from ``release``.

        On Linux the workers are forked from one template process that imports everything once
        (``verifiers.workers.forked``); workers started later (replacements) start as their own
        interpreters."""
        self._prepare()
        if not can_fork():
            self._launched = [
                (slot, *self._launch_process(slot)) for slot in range(self.num_workers)
            ]
            return self
        slots = [(slot, *self._new_identity(slot)) for slot in range(self.num_workers)]
        self._template = Template(
            self._settings(), [(identity, beat) for _, identity, beat in slots]
        )
        self._launched = [
            (slot, identity.encode(), self._template.workers[identity], beat)
            for slot, identity, beat in slots
        ]
        return self

    def abandon(self) -> None:
        """End what ``launch()`` started when the pool is never started (synchronous)."""
        if self._loop is not None:
            return  # started: close() ends it
        for _, _, process, _ in self._launched:
            if process.poll() is None:
                process.terminate()
        for _, _, process, _ in self._launched:
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(1)
        self._launched = []
        if self._template is not None:
            self._template.stop()
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    def _prepare(self) -> None:
        # 0700, so other users cannot connect; named for this process, so a pool that starts
        # after a caller was SIGKILLed removes what that caller left
        remove_abandoned(Path(tempfile.gettempdir()), WORK_DIR_PREFIX)
        self._dir = str(owned_dir(WORK_DIR_PREFIX))
        # removed at interpreter exit too, if a signal unwinds the caller past close()
        weakref.finalize(self, shutil.rmtree, self._dir, True)
        self.address = f"ipc://{self._dir}/pool.sock"

    async def start(self) -> WorkerPool:
        import zmq
        import zmq.asyncio

        self._loop = asyncio.get_running_loop()
        if not self._dir:
            self._prepare()
        self._ctx = zmq.asyncio.Context()
        self._router = self._ctx.socket(zmq.ROUTER)
        self._router.setsockopt(zmq.LINGER, 0)
        self._router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self._router.bind(self.address)  # launched workers connected first: zmq queued for it
        self._receiver = asyncio.create_task(self._receive())
        if self._launched:
            self._workers = [
                _Worker(slot, identity, process, beat, self._loop.create_future())
                for slot, identity, process, beat in self._launched
            ]
        else:
            self._workers = [self._spawn(slot) for slot in range(self.num_workers)]
        self._watcher = threading.Thread(target=self._watch, name="vf-worker-watch", daemon=True)
        self._watcher.start()
        try:
            await asyncio.wait_for(self._until_ready(), self.start_timeout)
            self._check_releases()
        except TimeoutError:
            await self.close()
            raise EnvWorkerError(
                f"the environment workers for {self.env_id} did not start within "
                f"{self.start_timeout:g}s"
            ) from None
        except BaseException:
            await self.close()
            raise
        return self

    async def _until_ready(self) -> None:
        """Every worker ready. One that dies while starting (killed, crashed) is replaced as at
        any time, and its replacement waited for: a SIGKILL that happened to land while the
        workers imported failed the whole run. One that cannot load the environment, more
        deaths while starting than there are workers (the environment crashes as it loads),
        or a pool that stopped restarting workers, ends the start with that error."""
        while True:
            workers = list(self._workers)
            starting = [w.ready for w in workers if not w.ready.done()]
            if starting:
                await asyncio.wait(starting, return_when=asyncio.FIRST_COMPLETED)
                continue
            failed = [w for w in workers if w.ready.exception() is not None]
            if not failed:
                return
            first = failed[0].ready.exception()
            assert first is not None
            if self._broken is not None:
                raise EnvWorkerError(self._broken)
            for worker in failed:
                if worker.load_failed:
                    raise first if (error := worker.ready.exception()) is None else error
            if self._start_deaths > self.num_workers:
                raise first
            await asyncio.sleep(0.05)  # its replacement is on its way (after a pause)

    def _spawn(self, slot: int) -> _Worker:
        assert self._loop is not None
        identity, process, heartbeat = self._launch_process(slot)
        return _Worker(slot, identity, process, heartbeat, self._loop.create_future())

    def _new_identity(self, slot: int) -> tuple[str, str]:
        """A new worker's identity and its heartbeat file (stamped now)."""
        identity = f"w{slot}-{next(_ids)}"
        heartbeat = os.path.join(self._dir, f"{identity}.beat")
        with open(heartbeat, "wb") as f:
            f.write(BEAT.pack(time.monotonic()))
        return identity, heartbeat

    def _settings(self) -> dict[str, Any]:
        """What every worker is told (on stdin: not on a command line others can read)."""
        return {
            "env_id": self.env_id,
            "env_args": self.env_args,
            "address": self.address,
            "parent_pid": os.getpid(),
            "release": self.release,
            "log_level": logging.getLogger("verifiers").getEffectiveLevel(),
        }

    def _launch_process(self, slot: int) -> tuple[bytes, WorkerProcess, str]:
        identity, heartbeat = self._new_identity(slot)
        process = subprocess.Popen(
            [sys.executable, "-m", "verifiers.workers.process", str(os.getpid())],
            stdin=subprocess.PIPE,
        )
        settings = {**self._settings(), "identity": identity, "heartbeat": heartbeat}
        assert process.stdin is not None
        process.stdin.write(json.dumps(settings).encode() + b"\n")
        process.stdin.close()
        return identity.encode(), process, heartbeat

    def _check_releases(self) -> None:
        """Every worker runs the environment as the release this process does (a worker
        launched before the caller knew it loads it as its package says: the same, unless
        something between them changed)."""
        wrong = [w for w in self._workers if self.release and w.release not in (None, self.release)]
        if wrong:
            raise EnvWorkerError(
                f"environment worker {wrong[0].slot} loaded {self.env_id} as verifiers "
                f"{wrong[0].release}, this process as {self.release}: its rows would differ"
            )

    async def close(self) -> None:
        """Stop the workers (a clean exit first, then a kill) and answer what was pending."""
        self._closing = True
        for pending in [*self._pending.values(), *self._waiting, *self._suspects]:
            if not pending.future.done():
                pending.future.set_result(Response(success=False, error="the worker pool closed"))
        self._pending.clear()
        self._waiting.clear()
        self._suspects.clear()
        for worker in self._workers:
            if worker.alive():
                worker.process.terminate()
        deadline = time.monotonic() + 5
        for worker in self._workers:
            try:
                worker.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait(1)
        if self._template is not None:
            self._template.stop()
        if self._receiver is not None:
            self._receiver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._receiver
        if self._router is not None:
            self._router.close()
            self._ctx.term()
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)

    async def __aenter__(self) -> WorkerPool:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "processes",
            "workers": self.num_workers,
            "restarts": self.restarts,
            "isolated": self.isolated,
        }

    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if not w.dead]

    # --- requests --------------------------------------------------------------------------------
    async def run_group(self, request: RunGroupRequest) -> Response:
        """Run one group on the least busy worker; see the module docstring for failures."""
        assert self._loop is not None, "start() the pool first"
        if self._broken is not None:
            return Response(success=False, error=self._broken)
        pending = _Pending(
            request_id=f"r{next(_ids)}".encode(),
            payload=pack(request),
            future=self._loop.create_future(),
        )
        self._dispatch(pending)
        if not request.timeout:
            try:
                return await asyncio.shield(pending.future)
            except asyncio.CancelledError:
                self._cancel(pending)
                raise
        # the worker answers a timed-out group itself when its code yields; one stuck in code
        # that will not yield is given as long again (at most TIMEOUT_GRACE) before it is killed
        limit = request.timeout + min(TIMEOUT_GRACE, max(2.0, request.timeout))
        try:
            return await self._wait_running(pending, limit)
        except asyncio.CancelledError:
            self._cancel(pending)
            raise

    async def _wait_running(self, pending: _Pending, limit: float) -> Response:
        """The group's answer, its time counted only while a worker runs it. Past ``limit`` its
        worker is killed as stuck, and the death is handled as any other (``_died``): a group
        stuck beside others is a suspect run again alone, one stuck alone has a strike."""
        assert self._loop is not None
        while True:
            started = pending.started
            if started is None:  # waiting for a worker (a suspect's turn): not its time
                await asyncio.wait({pending.future}, timeout=0.5)
            else:
                left = started + limit - self._loop.time()
                await asyncio.wait({pending.future}, timeout=max(left, 0.0))
                worker = pending.worker
                if not pending.future.done() and pending.started == started and worker:
                    if not worker.dead and worker.alive():
                        logger.warning(
                            "worker %s did not answer a group within %.0fs: killing it",
                            worker.slot,
                            limit,
                        )
                        worker.stuck = f"did not answer within {limit:g}s"
                        worker.process.kill()
                    pending.started = None  # until the pool runs it again
            if pending.future.done():
                return pending.future.result()

    def _dispatch(self, pending: _Pending) -> None:
        if pending.suspect:
            self._suspects.append(pending)
            self._run_suspects()
            return
        live = [
            w
            for w in self._workers
            if not w.dead and not w.reserved and w.ready.done() and not w.ready.exception()
        ]
        if not live:
            self._waiting.append(pending)
            return
        self._send(min(live, key=lambda w: len(w.inflight)), pending)

    def _send(self, worker: _Worker, pending: _Pending) -> None:
        assert self._loop is not None
        pending.worker, pending.started = worker, self._loop.time()
        worker.inflight.add(pending.request_id)
        self._pending[pending.request_id] = pending
        # the asyncio socket answers a failed send in the future it returns, not by raising:
        # unread, it was a "Host unreachable" traceback on stderr when the future was collected.
        # Read at once when it is done (it mostly is), before the watcher's word of the death
        sent = self._router.send_multipart([worker.identity, pending.request_id, pending.payload])
        if sent.done():
            self._undelivered(sent, worker, pending)
        else:
            sent.add_done_callback(lambda done: self._undelivered(done, worker, pending))

    def _undelivered(self, sent: asyncio.Future[Any], worker: _Worker, pending: _Pending) -> None:
        """A request zmq could not hand to its worker (``ROUTER_MANDATORY``: the worker's
        socket is gone, as it is when the worker died): the worker's death, handled as any
        other, and the request, which never reached it, sent elsewhere as it was (not a
        suspect: it cannot be what killed the worker). Already dead, the worker's death
        answered for it as for any group in flight."""
        if sent.cancelled() or (error := sent.exception()) is None:
            return
        logger.debug("worker %s could not be sent a group: %s", worker.slot, error)
        if self._closing or worker.dead:
            return
        worker.inflight.discard(pending.request_id)
        self._pending.pop(pending.request_id, None)
        pending.worker, pending.started = None, None
        if worker.alive():  # unreachable though running: of no use, and replaced
            worker.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.process.wait(1)
        code = worker.process.poll()
        gone = _describe_exit(code) if code is not None else "was killed"
        self._died(worker, f"could not be reached: it {gone}")
        if not pending.future.done():
            self._dispatch(pending)

    def _run_suspects(self) -> None:
        """Run waiting suspects alone: on reserved workers that are idle, reserving (draining)
        one more worker while suspects wait and fewer than half the workers are reserved; with
        no suspect left, the reserved workers take ordinary groups again."""
        self._suspects = [p for p in self._suspects if not p.future.done()]
        if not self._suspects:
            released = False
            for worker in self._workers:
                released |= worker.reserved
                worker.reserved = False
            if released:
                self._flush_waiting()
            return
        reserved = [w for w in self._workers if w.reserved and not w.dead]
        if len(reserved) < max(1, self.num_workers // 2):
            candidates = [w for w in self._workers if not w.reserved and not w.dead]
            if candidates:
                chosen = min(candidates, key=lambda w: len(w.inflight))
                chosen.reserved = True
                reserved.append(chosen)
        for worker in reserved:
            if self._suspects and worker.idle():
                self.isolated += 1
                self._send(worker, self._suspects.pop(0))

    def _cancel(self, pending: _Pending) -> None:
        self._pending.pop(pending.request_id, None)
        worker = pending.worker
        if worker is not None and not worker.dead:
            worker.inflight.discard(pending.request_id)
            # to a worker that is gone, the cancel is moot: its failure read, never reported
            sent = self._router.send_multipart([worker.identity, pending.request_id, b""])
            sent.add_done_callback(lambda done: done.cancelled() or done.exception())

    async def _receive(self) -> None:
        while True:
            frames = await self._router.recv_multipart()
            worker = next((w for w in self._workers if w.identity == frames[0]), None)
            if worker is None:
                continue
            if frames[1] == READY and len(frames) <= 3:
                if len(frames) == 3:  # [READY, release]; a worker of an older SDK sends none
                    worker.release = frames[2].decode(errors="replace") or None
                if not worker.ready.done():
                    worker.ready.set_result(True)
                    logger.debug(
                        "worker %d (pid %d) ready with %s",
                        worker.slot,
                        worker.process.pid,
                        self.env_id,
                    )
                self._flush_waiting()
            elif len(frames) == 3 and frames[1] == FAILED:
                message = frames[2].decode(errors="replace")
                error = f"the environment worker could not load {self.env_id}: {message}"
                if not worker.ready.done():
                    worker.ready.set_exception(EnvWorkerError(error))
                worker.dead = worker.load_failed = True
                if all(w.dead for w in self._workers):  # nothing left to run what waits
                    for waiter in self._waiting:
                        if not waiter.future.done():
                            waiter.future.set_result(Response(success=False, error=error))
                    self._waiting.clear()
            elif len(frames) == 3:
                request_id = frames[1]
                worker.inflight.discard(request_id)
                self._deaths_in_a_row = 0
                pending = self._pending.pop(request_id, None)
                if pending is not None and not pending.future.done():
                    try:
                        pending.future.set_result(Response.model_validate(unpack(frames[2])))
                    except Exception as exc:
                        pending.future.set_result(
                            Response(success=False, error=f"unreadable reply: {exc}")
                        )
                if worker.reserved:
                    self._run_suspects()

    def _flush_waiting(self) -> None:
        if self._suspects:
            self._run_suspects()
        waiting, self._waiting = self._waiting, []
        for pending in waiting:
            if not pending.future.done():
                self._dispatch(pending)

    # --- health ----------------------------------------------------------------------------------
    def _watch(self) -> None:
        """Runs in a thread: the event loop being blocked cannot delay noticing a dead worker."""
        loop = self._loop
        assert loop is not None, "start() the pool first"
        while not self._closing:
            for worker in list(self._workers):
                if worker.dead:
                    continue
                code = worker.process.poll()
                if code is not None:
                    loop.call_soon_threadsafe(self._died, worker, _describe_exit(code))
                elif (beat := read_beat(worker.heartbeat)) is not None and (
                    time.monotonic() - beat > self.hang_timeout
                ):
                    logger.warning("worker %s stopped beating: killing it", worker.slot)
                    worker.process.kill()
                elif (used := resident_mb(worker.process.pid)) > self.memory_limit_mb:
                    logger.warning(
                        "worker %s uses %d MiB, over its %d MiB budget: replacing it",
                        worker.slot,
                        used,
                        self.memory_limit_mb,
                    )
                    worker.stuck = f"grew to {used} MiB, over its {self.memory_limit_mb} MiB budget"
                    worker.process.kill()
            time.sleep(0.25)

    def _died(self, worker: _Worker, reason: str) -> None:
        if worker.dead or self._closing:
            return
        worker.dead = True
        reason = worker.stuck or reason  # killed by the pool for not answering: say that
        if self._broken is not None:  # given up: its groups were answered then
            return
        self._deaths_in_a_row += 1
        if not worker.ready.done():
            self._start_deaths += 1
            worker.ready.set_exception(
                EnvWorkerError(f"environment worker {worker.slot} {reason} while starting")
            )
        inflight = [self._pending.pop(r, None) for r in list(worker.inflight)]
        groups = [p for p in inflight if p is not None and not p.future.done()]
        alone = len(groups) == 1
        for pending in groups:
            if alone:
                # a crash alone may be a fluke (an OOM kill from outside): run it again; past
                # its own time limit alone, it is what is stuck, as a group that yields is
                # answered at its timeout with no retry
                pending.attempts += 1
            if pending.attempts > self.retries or (alone and worker.stuck):
                pending.future.set_result(
                    Response(
                        success=False,
                        error=f"the environment worker running this group alone {reason}, "
                        f"{pending.attempts} time(s): this group is what kills it; recorded "
                        "as an error",
                    )
                )
        if self._deaths_in_a_row >= self.max_deaths_in_a_row:
            self._give_up(worker, reason, groups)
            return
        pause = (
            min(0.25 * 2 ** (self._deaths_in_a_row - 2), 5.0) if self._deaths_in_a_row > 1 else 0
        )
        logger.warning(
            "environment worker %s %s (running %d group(s)); starting a replacement%s",
            worker.slot,
            reason,
            len(groups),
            f" in {pause:.2f}s ({self._deaths_in_a_row} deaths in a row)" if pause else "",
        )
        for pending in groups:
            if not pending.future.done():
                pending.suspect = True  # beside others: not guilty yet, but runs alone now
                pending.started = None
                self._dispatch(pending)
        assert self._loop is not None
        if pause:
            self._loop.call_later(pause, self._replace, worker)
        else:
            self._replace(worker)

    def _replace(self, worker: _Worker) -> None:
        if self._closing or self._broken is not None or worker not in self._workers:
            return
        replacement = self._spawn(worker.slot)
        # reserved as the dead one was, unless another was reserved meanwhile: then all of
        # them would run suspects and ordinary groups would wait for the last suspect
        reserved = sum(w.reserved and not w.dead for w in self._workers)
        replacement.reserved = worker.reserved and reserved < max(1, self.num_workers // 2)
        self._workers[self._workers.index(worker)] = replacement
        self.restarts += 1
        replacement.ready.add_done_callback(lambda _: self._flush_waiting())

    def _give_up(self, worker: _Worker, reason: str, groups: list[_Pending]) -> None:
        """Too many deaths with nothing answered between them: restarting is a hot loop that
        helps nobody. Every group is answered with why, and so is every later one."""
        self._broken = (
            f"the environment workers for {self.env_id} died {self._deaths_in_a_row} times in a "
            f"row without finishing a group (the last {reason}); no longer restarting them"
        )
        logger.error("%s", self._broken)
        for pending in [*groups, *self._pending.values(), *self._waiting, *self._suspects]:
            if not pending.future.done():
                pending.future.set_result(Response(success=False, error=self._broken))
        self._pending.clear()
        self._waiting.clear()
        self._suspects.clear()
        for other in self._workers:
            if other is not worker and other.alive():
                other.process.kill()


def resident_mb(pid: int) -> int:
    """A process's resident memory in MiB (0 when it cannot be read: it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE") // 2**20


def default_memory_limit_mb(workers: int) -> int:
    """``$VF_WORKER_MEMORY_MB``, else 80% of this machine's memory shared among the workers."""
    configured = os.environ.get("VF_WORKER_MEMORY_MB", "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    return max(256, int(total * 0.8) // max(workers, 1))


def _describe_exit(code: int) -> str:
    if code < 0:
        import signal

        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with code {code}"
