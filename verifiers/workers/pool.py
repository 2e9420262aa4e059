"""A pool of environment worker processes on this machine.

Scheduling, isolation on retry, timeouts and giving up are ``verifiers.workers.isolation``'s,
shared with Ray actors. What is particular to processes is here: a thread outside the event loop
checks the workers every quarter second (so a blocked loop cannot hide a dead worker): a worker
that exited (crashed, segfaulted, was killed, ran out of memory), stopped beating, or grew past
its memory budget is replaced, its groups handled as on any death; a worker that dies while the
pool starts is replaced as at any other time. One growing fast or near its budget is looked at
every ``CLOSER_S`` meanwhile (a blow-up is caught near the budget, not at twice it), and one
over its budget first says which group's code is running (``stall.read_grower``): that group
runs alone first (``IsolatingPool._died``). A worker whose loop a group's code holds says
which group (``verifiers.workers.stall``), so that a group stuck past its limit among others is
convicted at once rather than found by running them all again alone; the same word, from the
watcher, has the groups beside a loop held ``HEDGE_AFTER_S`` run again elsewhere at once
(``IsolatingPool._loop_held``) rather than wait for that verdict. Requests travel over a ZeroMQ socket in a 0700
directory. Closing the pool stops the workers; they also die with the caller however it dies
(``verifiers.workers.process``).

Over 400 lines, not split: the processes' lifecycle (launch from a template, start, abandon,
close), their socket and their watcher all read and change the one table of workers the
scheduler shares.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

from verifiers.errors import EnvWorkerError
from verifiers.processes.socket_dirs import socket_dir
from verifiers.workers.forked import Template, WorkerProcess, can_fork, fork_here
from verifiers.workers.isolation import (
    HEDGE_AFTER_S,
    TIMEOUT_GRACE,
    IsolatingPool,
    _Pending,
    _Slot,
)
from verifiers.workers.process import BEAT, FAILED, READY, read_beat
from verifiers.workers.protocol import Response, receive_batch, unpack
from verifiers.workers.stall import (
    GROWN_SIGNAL,
    Stall,
    frames_path,
    read_grower,
    read_stall,
    stall_path,
)

logger = logging.getLogger("verifiers.workers")
__all__ = ["TIMEOUT_GRACE", "WORK_DIR_PREFIX", "WorkerPool"]
WORK_DIR_PREFIX = "vf-workers-"
WATCH_S = 0.25  # how often the watcher looks at every worker
CLOSER_S = 0.01  # how often at the memory of one that grows fast or is near its budget
CLOSER_GROWTH = 32  # grown by 1/32 of its budget since the last look at every worker: fast
GROWER_WAIT_S = 0.2  # how long a worker over its budget has to say which group's code runs
_ids = itertools.count()
# signals a process's own code raises (a bad access, an abort), never sent to it from outside
# as a matter of course
_FAULT_SIGNALS = frozenset(
    int(s) for s in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT)
)


@dataclass(kw_only=True)
class _Worker(_Slot):
    identity: bytes
    process: WorkerProcess
    heartbeat: str  # the file it writes its heartbeat to
    release: str | None = None  # the release it said it loaded the environment as
    load_failed: bool = False  # said it could not load the environment (not replaced)
    # its resident memory at the watcher's last look at every worker (over its budget: when
    # it was found so)
    resident_mb: int = 0
    grown_at: float | None = None  # when it was found over its memory budget (monotonic)
    frames_size: int = 0  # of the frames it wrote since (``_over_budget``)

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        self.process.kill()


class WorkerPool(IsolatingPool[_Worker]):
    """``num_workers`` processes, each running ``vf.load_environment(env_id, **env_args)``.

    Args:
        release: the classic release the environment is built with (``verifiers.classic``).
        retries: how many more times a group whose worker was killed (SIGKILL, SIGTERM)
            while it ran alone is run again (alone) before it is the culprit; one whose worker
            exited or segfaulted alone is the culprit at once (its own code's doing).
        hang_timeout: seconds without a heartbeat after which a worker is killed as hung.
        max_deaths_in_a_row: worker deaths with no group answered in between after which
            the pool stops restarting workers; default ``$VF_WORKER_MAX_DEATHS``, else
            ``4 * num_workers + 8``.
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
        super().__init__(env_id, num_workers, retries, max_deaths_in_a_row)
        self.env_args, self.release = dict(env_args or {}), release
        self.start_timeout, self.hang_timeout = start_timeout, hang_timeout
        self.memory_limit_mb = memory_limit_mb or default_memory_limit_mb(num_workers)
        self._dir = ""  # made by start(): the socket and the heartbeats
        self.address = ""
        self._ctx: Any = None
        self._router: Any = None
        self._receiver: asyncio.Task[None] | None = None
        self._watcher: threading.Thread | None = None
        # processes started by launch(), before start() had an event loop to wait on them
        self._launched: list[tuple[int, bytes, WorkerProcess, str]] = []
        self._template: Template | None = None  # what later workers are forked from

    # --- lifecycle -------------------------------------------------------------------------------
    def launch(self) -> WorkerPool:
        """Start the worker processes now, without waiting for them: they load the environment
        while the caller goes on (vf-eval calls this first thing, before it loads the
        environment itself); ``start()`` then waits for them, and ``abandon()`` ends them if it
        never comes to that. A worker launched before the caller knew the environment's release
        loads it as its package says, and ``start()`` refuses one that differs from ``release``.

        On Linux the workers are forked from one template process that imports everything once
        (``verifiers.workers.forked``), and so are workers started later (replacements, the
        workers that run suspects alone) while the template lives."""
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

    def fork(self, env: Any) -> WorkerPool:
        """Fork the workers from this process, which has just loaded ``env`` as this pool's
        environment (vf-eval does, when ``forked.fork_safe``): each serves its copy of it, so
        a worker costs no interpreter start, import or load, only the fork (milliseconds).
        ``start()`` then waits for them as for launched ones. A template is forked beside them
        (``forked.fork_here``), so that replacements and the workers that run suspects alone
        fork from it in milliseconds, as in a launched pool (a template started at the first
        death cost seconds in which that worker's groups waited)."""
        self._prepare()
        release = getattr(env, "release", None)
        self.release = str(release) if release is not None else None
        slots = [(slot, *self._new_identity(slot)) for slot in range(self.num_workers)]
        children, self._template = fork_here(
            self._settings(), [(i, beat) for _, i, beat in slots], env
        )
        self._launched = [
            (slot, identity.encode(), children[identity], beat) for slot, identity, beat in slots
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
        self._dir = str(socket_dir(WORK_DIR_PREFIX, "pool.sock"))
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
                _Worker(
                    slot=slot,
                    identity=identity,
                    process=process,
                    heartbeat=beat,
                    ready=self._loop.create_future(),
                )
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
        """A new worker: forked from the template when there is one (a replacement ready in
        milliseconds), else a fresh interpreter."""
        assert self._loop is not None
        forked = None
        if self._template is not None:
            name, heartbeat = self._new_identity(slot)
            forked = self._template.fork(name, heartbeat)
        process: WorkerProcess
        if forked is not None:
            identity, process = name.encode(), forked
        else:
            identity, process, heartbeat = self._launch_process(slot)
        return _Worker(
            slot=slot,
            identity=identity,
            process=process,
            heartbeat=heartbeat,
            ready=self._loop.create_future(),
        )

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
        self._answer_pending("the worker pool closed")
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
            "isolation_workers": self.isolation_workers,
            "named_by_worker": self.named_by_worker,
            "grower_named": self.grower_named,
            "rerun_beside_held": self.rerun_beside_held,
            "stand_ins": self.stand_ins,
        }

    def pids(self) -> list[int]:
        return [w.process.pid for w in self._workers if not w.dead]

    # --- requests --------------------------------------------------------------------------------
    def _stall(self, worker: _Worker) -> Stall | None:
        return read_stall(stall_path(worker.heartbeat))

    def _own_doing(self, worker: _Worker) -> bool:
        # an exit (any code) or a fault signal comes from the worker's own code; SIGKILL,
        # SIGTERM and the like may come from outside (the OOM killer, an operator)
        code = worker.process.poll()
        return code is not None and (code >= 0 or -code in _FAULT_SIGNALS)

    def _isolation_capacity(self) -> int:
        # forked from the template, a worker for suspects costs milliseconds: run them all at
        # once (a fresh interpreter costs a second of CPU: reserve workers instead)
        return max(4, self.num_workers) if self._template is not None else 0

    def _transmit(self, worker: _Worker, pending: _Pending[_Worker]) -> None:
        # the asyncio socket answers a failed send in the future it returns, not by raising:
        # unread, it was a "Host unreachable" traceback on stderr when the future was collected.
        # Read at once when it is done (it mostly is), before the watcher's word of the death
        sent = self._router.send_multipart([worker.identity, pending.request_id, pending.payload])
        if sent.done():
            self._undelivered(sent, worker, pending)
        else:
            sent.add_done_callback(lambda done: self._undelivered(done, worker, pending))

    def _withdraw(self, worker: _Worker, pending: _Pending[_Worker]) -> None:
        # to a worker that is gone, the cancel is moot: its failure read, never reported
        sent = self._router.send_multipart([worker.identity, pending.request_id, b""])
        sent.add_done_callback(lambda done: done.cancelled() or done.exception())

    def _undelivered(
        self, sent: asyncio.Future[Any], worker: _Worker, pending: _Pending[_Worker]
    ) -> None:
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

    async def _receive(self) -> None:
        import zmq

        plain: Any = zmq.Socket.shadow(self._router.underlying)  # queued: read without a wait
        while True:
            for frames in await receive_batch(self._router, plain):
                self._take(frames)

    def _take(self, frames: list[bytes]) -> None:
        """One message from a worker: ready, failed to load, or a group's answer."""
        worker = next((w for w in self._workers if w.identity == frames[0]), None)
        if worker is None:
            return
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
            if frames[1] in self._pending:  # read only when someone waits for it
                try:
                    response = Response.model_validate(unpack(frames[2]))
                except Exception as exc:
                    response = Response(success=False, error=f"unreadable reply: {exc}")
            else:
                response = Response(success=False, error="no longer waited for")
            self._answered(worker, frames[1], response)

    # --- health ----------------------------------------------------------------------------------
    def _watch(self) -> None:
        """Runs in a thread: the event loop being blocked cannot delay noticing a dead worker.
        Every ``WATCH_S`` it looks at each worker; between those looks, at the memory of the
        ones growing fast or near their budget every ``CLOSER_S`` (``_look_at_memory``)."""
        loop = self._loop
        assert loop is not None, "start() the pool first"
        while not self._closing:
            started, closer = time.monotonic(), []
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
                else:
                    if self._look_at_memory(worker, every=True):
                        closer.append(worker)
                    if worker.grown_at is None:
                        self._watch_loop(worker, loop)
            while closer and not self._closing:
                left = started + WATCH_S - time.monotonic()
                if left <= 0:
                    break
                time.sleep(min(CLOSER_S, left))
                closer = [
                    w
                    for w in closer
                    if not w.dead and w.alive() and self._look_at_memory(w, every=False)
                ]
            time.sleep(max(0.0, started + WATCH_S - time.monotonic()))

    def _look_at_memory(self, worker: _Worker, every: bool) -> bool:
        """Look at ``worker``'s resident memory (``every``: on the look at every worker, which
        also says how fast it grows); whether to look again before the next such look. One that
        grew ``1/CLOSER_GROWTH`` of its budget or more since the last, or is past 90% of it, is
        looked at every ``CLOSER_S`` until then: a blow-up (1.8 GB/s, one allocation) went up to
        a quarter second, twice the budget, past it before the next look saw it."""
        used, budget = resident_mb(worker.process.pid), self.memory_limit_mb
        if used > budget or worker.grown_at is not None:
            return not self._over_budget(worker, used)
        if not every:
            return True
        before, worker.resident_mb = worker.resident_mb or used, used
        return used - before >= budget / CLOSER_GROWTH or used >= budget * 0.9

    def _over_budget(self, worker: _Worker, used: int) -> bool:
        """``worker`` is over its memory budget: ask it which group's code runs (it writes its
        frames, ``stall.watch_growth``), and once it said, or ``GROWER_WAIT_S`` passed, or it
        grew by a quarter of its budget more meanwhile, kill it (its groups handled as on any
        death, the group it named run alone first). Whether it was killed."""
        budget, now = self.memory_limit_mb, time.monotonic()
        if worker.grown_at is None:
            worker.resident_mb = used
            logger.warning(
                "worker %s uses %d MiB, over its %d MiB budget: replacing it",
                worker.slot,
                used,
                budget,
            )
            worker.stuck = f"grew to {used} MiB, over its {budget} MiB budget"
            worker.grown_at = now
            with contextlib.suppress(OSError):  # not a pid that may be another's by now
                worker.process.send_signal(GROWN_SIGNAL)
            return False
        size, group = read_grower(frames_path(worker.heartbeat))
        written, worker.frames_size = size > 0 and size == worker.frames_size, size
        waited, grew = now - worker.grown_at, used - worker.resident_mb
        if not written and waited < GROWER_WAIT_S and grew <= budget / 4:
            return False
        worker.grower = group if written else None
        worker.process.kill()
        return True

    def _watch_loop(self, worker: _Worker, loop: asyncio.AbstractEventLoop) -> None:
        """Tell the scheduler (on its loop) while ``worker`` says one group has held its event
        loop ``HEDGE_AFTER_S`` or more, and once it turns again."""
        stall = self._stall(worker)
        held = (
            stall is not None
            and time.monotonic() - stall.seen < 1.0
            and stall.seen - stall.since >= HEDGE_AFTER_S
        )
        if held or worker.held:
            loop.call_soon_threadsafe(self._loop_held, worker, stall if held else None)


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
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name}"
        return f"was killed by signal {-code}"
    return f"exited with code {code}"
