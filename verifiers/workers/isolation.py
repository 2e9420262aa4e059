"""Isolate on retry: the scheduling every pool of environment workers shares, whatever its
workers are (processes on this machine, ``verifiers.workers.pool``; Ray actors,
``verifiers.workers.ray_pool``).

Requests go to the least busy live worker. Faults cost only their own. The groups a dead worker
was running are not guilty: they become *suspects* and are isolated before anyone's last
attempt is spent: where workers start cheaply (forked from a template: ``_isolation_capacity``),
at once, shared among up to that many workers started for them, a share whose worker dies shared
again the same way, down to one group alone; else each alone, one at a time on a worker reserved
for them (the others keep running the rest). A suspect that killed a worker alone goes first,
and so does the group a worker over its memory budget named as running (``_Slot.grower``),
alone, the others shared among the other workers: word, not proof, so it is convicted only
alone (found by halving, it took a blow-up per step). A group that kills a worker while it runs
alone has a strike; one with more strikes than
``retries``, or whose worker's death alone was its own doing (an exit, a segfault:
``_own_doing``), is the culprit and is answered with an error naming the cause (exit code, signal),
which the caller records on each of its rollouts (``fault``: ``CULPRIT``). A group that runs
past its timeout (plus a grace period for the worker to answer it) gets its worker killed and
replaced, since a worker that cannot answer is stuck; stuck while alone, it is the culprit at
once, its limit being its own. Stuck beside others, it is the culprit at once too when the
worker says (``_stall``, ``verifiers.workers.stall``) that this group's own code has held its
event loop without a turn since before the group's timeout: the groups beside it run again as
any group, and none runs alone; while the worker names another group, a group whose limit passed
waits for that group's verdict (``_held_by_another``). Word that is ambiguous, stale or absent
(Ray actors give none) is a plain kill, its groups suspects as above. Workers that die again and
again are restarted with a growing pause, and after ``max_deaths_in_a_row`` deaths with no group
answered in between the pool stops restarting them and answers every group with that error
(``fault``: ``UNAVAILABLE``).

A worker whose loop one group's code has held for ``HEDGE_AFTER_S`` (its word, as above) holds
the groups beside it too, and their share of the caller's concurrency, until that group's
verdict (its timeout and ``WORD_MARGIN`` later): ``_loop_held`` runs each of them again at once
on another worker, as a *twin* (a copy under a request id of its own, timed as any group), and
sends no new group to the held worker while another is free. Whichever copy answers first is the
group's one answer (its caller awaits one future, so a group is recorded once even when both
answer); the other is withdrawn. The held worker is not killed for it: the holder may be a
legitimate slow sync call, and then its loop turns again and the groups beside it go on; if it
is stuck, the holder is convicted as before, and the groups beside it whose twins still run are
not run a third time. A twin is never twinned again; a suspect's twin is a suspect too. Where
workers start cheaply, a worker is forked to stand in for each held one (``_stand_ins``): it
takes the twins and the new groups, so a held loop costs the run no worker's worth of CPU (with
one worker, the twins had nowhere to go and every group waited for the verdict); once the loop
turns again or the held worker dies, the stand-in takes no new group and stops when empty.

A subclass starts a worker (``_spawn``), carries a request to it (``_transmit``) and a cancel
(``_withdraw``), says when one answered (``_answered``) or died (``_died``), and kills one
(``_Slot.kill``).

Over 400 lines, not split: dispatch, suspects (reserved or isolating workers), timeouts, deaths
and giving up all read and change the one table of workers and the queues of waiting groups.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from verifiers.errors import EnvWorkerError
from verifiers.workers.protocol import (
    CULPRIT,
    UNAVAILABLE,
    Response,
    RunGroupRequest,
    pack,
)
from verifiers.workers.stall import Stall

logger = logging.getLogger("verifiers.workers")
TIMEOUT_GRACE = 30.0
WORD_MARGIN = 2.0  # past a group's timeout, when the worker's word on what holds it is looked at
HEDGE_AFTER_S = 1.5  # a loop held this long by one group: the groups beside it run elsewhere too
ISOLATION_IDLE_S = 30.0  # how long a worker started for suspects waits for more before it stops
_ids = itertools.count()


@dataclass(kw_only=True)
class _Slot:
    """One worker as the scheduler sees it."""

    slot: int
    ready: asyncio.Future[bool]
    inflight: set[bytes] = field(default_factory=set)
    dead: bool = False
    reserved: bool = False  # runs suspects only, one at a time
    isolating: bool = False  # started to run suspects alone; stopped a while after none is left
    last_used: float = 0.0  # when it was last sent a group (loop time)
    stuck: str | None = None  # why the pool killed it, when it did
    culprit: bytes | None = None  # the group whose own code held it stuck, when it said so
    # the group whose code ran when it was found over its memory budget, when it said so
    # (word, not proof: that group runs alone first; see _died)
    grower: bytes | None = None
    held: bool = False  # its loop held past HEDGE_AFTER_S: sent no new group while another is free
    stand_in: bool = False  # started to take the groups of a held worker (``_stand_ins``)
    draining: bool = False  # a stand-in no longer needed: no new group, stopped once empty

    def idle(self) -> bool:
        return (
            not self.dead and not self.inflight and self.ready.done() and not self.ready.exception()
        )

    def alive(self) -> bool:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError


W = TypeVar("W", bound=_Slot)


@dataclass
class _Pending(Generic[W]):
    request_id: bytes
    payload: bytes
    future: asyncio.Future[Response]
    attempts: int = 0  # workers it killed while running alone
    worker: W | None = None
    suspect: bool = False  # in a worker that died beside others: runs isolated from now on
    share: int = 1  # a suspect: how many suspects it may run with (1: alone; see _died)
    grew: bool = False  # named as the grower of a worker over its memory budget: alone, first
    started: float | None = None  # when a worker began running it (loop time), if one is
    timeout: float | None = None  # its own time limit in the worker (the request's)
    limit: float | None = None  # how long the pool waits for its answer before killing
    # the copy of it run on another worker while its worker's loop was held (``_loop_held``);
    # on a twin, the group it is a copy of
    twin: _Pending[W] | None = None
    is_twin: bool = False


class IsolatingPool(Generic[W]):
    """The scheduler of ``num_workers`` workers of ``env_id`` (see the module docstring)."""

    def __init__(
        self, env_id: str, num_workers: int, retries: int, max_deaths_in_a_row: int | None
    ) -> None:
        if num_workers < 1:
            raise ValueError(
                f"an environment worker pool needs at least one worker, got {num_workers}"
            )
        self.env_id, self.num_workers, self.retries = env_id, num_workers, retries
        self.restarts = 0
        self.isolated = 0  # suspects run alone
        self.named_by_worker = 0  # culprits convicted on their worker's word (_convicted)
        self.grower_named = 0  # groups run alone first as their worker's grower (_died)
        self.isolation_workers = 0  # workers started to run them (_isolate)
        self.rerun_beside_held = 0  # twins of groups beside a held loop (_loop_held)
        self.stand_ins = 0  # workers started to stand in for held ones (_stand_ins)
        self._twin_waits: set[asyncio.Task[None]] = set()
        self.max_deaths_in_a_row = max_deaths_in_a_row or default_max_deaths(num_workers)
        self._deaths_in_a_row = 0
        self._start_deaths = 0  # workers that died before they were ready
        self._broken: str | None = None  # why the pool stopped restarting workers
        self._workers: list[W] = []
        self._pending: dict[bytes, _Pending[W]] = {}
        self._waiting: list[_Pending[W]] = []
        self._suspects: list[_Pending[W]] = []
        self._isolate_after = 0.0  # no worker started for suspects before then (loop time)
        self._isolate_later = False  # _isolate_again is scheduled
        self._retiring = False  # _retire_idle is scheduled
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- what a kind of worker provides ----------------------------------------------------------
    def _isolation_capacity(self) -> int:
        """How many workers of their own the pool may start beside its ``num_workers`` to run
        suspects alone, at once (a kind whose workers start cheaply); 0: it reserves some of
        its own workers for them instead, one suspect at a time on each."""
        return 0

    def _spawn(self, slot: int) -> W:
        """A new worker for ``slot``, starting (its ``ready`` set when it is)."""
        raise NotImplementedError

    def _transmit(self, worker: W, pending: _Pending[W]) -> None:
        """Carry ``pending``'s request to ``worker``."""
        raise NotImplementedError

    def _withdraw(self, worker: W, pending: _Pending[W]) -> None:
        """Tell ``worker`` its caller no longer waits for ``pending``."""
        raise NotImplementedError

    def _own_doing(self, worker: W) -> bool:
        """Whether ``worker``'s death was its own code's doing (an exit, a segfault), as no
        signal from outside is: a group that dies so alone is the culprit at once, where a
        death a kill from outside may explain (SIGKILL, as the OOM killer sends) is run alone
        once more. A kind that cannot tell answers False."""
        return False

    def _stall(self, worker: W) -> Stall | None:
        """What ``worker`` says holds its event loop now, if it says (``verifiers.workers.stall``;
        a kind whose workers cannot say answers None, and its stuck groups are found alone)."""
        return None

    # --- the shared scheduling -------------------------------------------------------------------
    @property
    def broken(self) -> str | None:
        """Why the pool stopped restarting workers (it runs no group now), if it did."""
        return self._broken

    def _answer_pending(self, error: str) -> None:
        """Answer every group not answered yet with ``error`` (the pool closes)."""
        for pending in [*self._pending.values(), *self._waiting, *self._suspects]:
            if not pending.future.done():
                pending.future.set_result(Response(success=False, error=error))
        self._pending.clear()
        self._waiting.clear()
        self._suspects.clear()

    def _answered(self, worker: W, request_id: bytes, response: Response) -> None:
        """``worker`` answered ``request_id``: a worker that answers is sound (deaths in a row
        start again from none), and a reserved one takes its next suspect."""
        worker.inflight.discard(request_id)
        self._deaths_in_a_row = 0
        pending = self._pending.pop(request_id, None)
        if pending is not None and not pending.future.done():
            pending.future.set_result(response)
        if worker.reserved or worker.isolating:
            self._run_suspects()
        self._retire_if_drained(worker)

    async def run_group(self, request: RunGroupRequest) -> Response:
        """Run one group on the least busy worker; see the module docstring for failures."""
        assert self._loop is not None, "start() the pool first"
        if self._broken is not None:
            return Response(success=False, error=self._broken, fault=UNAVAILABLE)
        pending: _Pending[W] = _Pending(
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
        pending.timeout, pending.limit = request.timeout, limit
        try:
            return await self._wait_running(pending, limit)
        except asyncio.CancelledError:
            self._cancel(pending)
            raise

    async def _wait_running(self, pending: _Pending[W], limit: float) -> Response:
        """The group's answer, its time counted only while a worker runs it. Past ``limit`` its
        worker is killed as stuck, and the death is handled as any other (``_died``): a group
        stuck beside others is a suspect run again alone, one stuck alone has a strike. The
        worker's word shortens and lengthens that: ``WORD_MARGIN`` past the group's own
        timeout, a group whose own code holds the loop is convicted then (``_convicted``); and
        while another group's code holds it, the wait goes on until that group's own limit
        (``_held_by_another``), whose verdict comes first."""
        assert self._loop is not None
        while True:
            started = pending.started
            if started is None:  # waiting for a worker (a suspect's turn): not its time
                await asyncio.wait({pending.future}, timeout=0.5)
            else:
                full = started + limit
                early = started + pending.timeout + WORD_MARGIN if pending.timeout else full
                deadline = min(early, full)
                while True:
                    left = deadline - self._loop.time()
                    await asyncio.wait({pending.future}, timeout=max(left, 0.0))
                    worker = pending.worker
                    if pending.future.done() or pending.started != started or not worker:
                        break
                    # killed already (for another group, or its memory): its death comes
                    if not worker.dead and worker.alive() and worker.stuck is None:
                        later = self._judge(pending, worker, deadline, full, limit)
                        if later is not None:
                            deadline = later
                            continue
                    pending.started = None  # until the pool runs it again
                    break
            if pending.future.done():
                return pending.future.result()

    def _judge(
        self, pending: _Pending[W], worker: W, deadline: float, full: float, limit: float
    ) -> float | None:
        """``pending`` has not answered by ``deadline``: kill its worker (None), or say until
        when to wait on (past its own timeout but not its limit, or another group's code
        holds the loop)."""
        if not self._convicted(pending, worker):
            if deadline < full:  # its own timeout passed, not its limit yet
                return full
            later = self._held_by_another(pending, worker, deadline)
            if later is not None:
                return later
            worker.stuck = f"did not answer within {limit:g}s"
            logger.warning(
                "worker %s did not answer a group within %.0fs: killing it", worker.slot, limit
            )
        worker.kill()
        return None

    def _convicted(self, pending: _Pending[W], worker: W) -> bool:
        """Whether ``worker`` says ``pending``'s own code has held its event loop, without a
        single turn, since before the group's own timeout (when the worker would have answered
        it) until now, past it: then that group is what holds the worker stuck, and an error
        whatever comes next; the evidence a run alone gives, at no second run. ``_died``
        convicts it (``culprit``) and runs the groups beside it again as any group."""
        assert self._loop is not None
        stall, timeout, started = self._fresh_stall(worker), pending.timeout, pending.started
        if stall is None or stall.group != pending.request_id:
            return False
        if timeout is None or started is None or stall.since > started + timeout:
            return False
        held = self._loop.time() - stall.since
        worker.culprit = pending.request_id
        worker.stuck = (
            f"was stuck by this group's own code: it held the worker's event loop for "
            f"{held:.0f}s without yielding, past the group's {timeout:g}s timeout"
        )
        logger.warning(
            "worker %s: a group's own code held its event loop past the group's timeout: "
            "killing it, the group convicted",
            worker.slot,
        )
        return True

    def _held_by_another(self, pending: _Pending[W], worker: W, deadline: float) -> float | None:
        """When to look again, if ``worker`` says another group's code holds its loop (``pending``
        cannot answer, through no fault of its own) and that group's own limit passes later:
        just after it, when that group's wait judges it. At most one more ``limit`` for
        ``pending``; else None (a plain kill)."""
        stall = self._fresh_stall(worker)
        if stall is None or stall.group is None or stall.group == pending.request_id:
            return None
        other = self._pending.get(stall.group)
        if other is None or other.worker is not worker or other.started is None:
            return None
        if other.limit is None or pending.started is None or pending.limit is None:
            return None
        later = other.started + other.limit + 1.0
        if later <= deadline or later > pending.started + 2 * pending.limit:
            return None
        return later

    def _fresh_stall(self, worker: W) -> Stall | None:
        """The worker's word on its stall, when it was still so within the last second."""
        stall = self._stall(worker)
        assert self._loop is not None
        if stall is None or self._loop.time() - stall.seen > 1.0:
            return None
        return stall

    def _loop_held(self, worker: W, stall: Stall | None) -> None:
        """``worker`` says ``stall.group``'s code has held its loop for ``HEDGE_AFTER_S`` or more
        (``stall``: None once it turned again): run every other group in flight there again on
        another worker now, each as a twin (see the module docstring), rather than leave them
        waiting for that group's verdict. Word that names no group twins nothing."""
        assert self._loop is not None
        worker.held = stall is not None and not worker.dead
        self._stand_ins()
        if not worker.held or stall is None or stall.group is None:
            return
        if self._closing or self._broken is not None or worker.reserved:
            return
        for request_id in list(worker.inflight):
            pending = self._pending.get(request_id)
            if (
                request_id == stall.group
                or pending is None
                or pending.future.done()
                or pending.twin is not None
                or pending.is_twin
            ):
                continue
            others = [
                w
                for w in self._workers
                if w is not worker
                and not (w.dead or w.held or w.reserved or w.isolating or w.draining)
                and w.ready.done()
                and not w.ready.exception()
            ]
            if not others and not pending.suspect:
                continue
            twin: _Pending[W] = _Pending(
                request_id=f"r{next(_ids)}".encode(),
                payload=pending.payload,
                future=self._loop.create_future(),
                timeout=pending.timeout,
                limit=pending.limit,
                twin=pending,
                is_twin=True,
                # a suspect (on a worker started for suspects) is not cleared of the death it
                # was beside: its twin runs as one too, in a share of its own size
                suspect=pending.suspect,
                share=pending.share,
            )
            pending.twin = twin
            self.rerun_beside_held += 1
            twin.future.add_done_callback(functools.partial(self._twin_answered, pending))
            pending.future.add_done_callback(functools.partial(self._twin_unneeded, twin))
            if twin.suspect:
                self._dispatch(twin)
            else:
                self._send(min(others, key=lambda w: len(w.inflight)), twin)
            if twin.limit is not None:  # timed as any group: stuck, its worker is killed
                wait = self._loop.create_task(self._wait_twin(twin, twin.limit))
                self._twin_waits.add(wait)
                wait.add_done_callback(self._twin_waits.discard)

    async def _wait_twin(self, twin: _Pending[W], limit: float) -> None:
        try:
            await self._wait_running(twin, limit)
        except asyncio.CancelledError:  # the group answered first: the twin was withdrawn
            pass

    def _twin_answered(self, pending: _Pending[W], done: asyncio.Future[Response]) -> None:
        """The twin answered first: its answer is the group's, and the group leaves the held
        worker (withdrawn there)."""
        if done.cancelled() or pending.future.done() or self._closing:
            return
        pending.future.set_result(done.result())
        self._lost(pending, done.result())
        self._drop(pending)

    def _twin_unneeded(self, twin: _Pending[W], done: asyncio.Future[Response]) -> None:
        """The group was answered (by its held worker, or stopped waited for): its twin is
        withdrawn wherever it is."""
        if not twin.future.done() and not self._closing:
            self._lost(twin, None if done.cancelled() else done.result())
            self._cancel(twin)

    def _lost(self, loser: _Pending[W], answer: Response | None) -> None:
        """The group was answered by its other copy, and ``loser`` is withdrawn; but a copy
        whose own code holds its worker's loop cannot be withdrawn, and no one waits for it any
        more: that worker would stay held, taking no group. Convicted elsewhere (``CULPRIT``),
        the same code is what holds it: killed now; else looked at once more when the copy's
        own limit passes (a slow sync call has returned by then)."""
        worker = loser.worker
        if worker is None or worker.dead or self._loop is None:
            return
        if answer is not None and answer.fault == CULPRIT:
            self._kill_if_held_by(worker, loser.request_id)
        elif loser.started is not None and loser.limit is not None:
            self._loop.call_at(
                loser.started + loser.limit, self._kill_if_held_by, worker, loser.request_id
            )

    def _kill_if_held_by(self, worker: W, request_id: bytes) -> None:
        """Kill ``worker`` if it says ``request_id``'s code, answered elsewhere, holds its loop
        (the groups beside it then run again as any group, as beside a named culprit)."""
        if worker.dead or self._closing or not worker.alive():
            return
        stall = self._fresh_stall(worker)
        if stall is None or stall.group != request_id:
            return
        worker.culprit = request_id
        worker.stuck = "was held by the code of a group answered on another worker"
        logger.warning("worker %s is held by a group answered elsewhere: killing it", worker.slot)
        worker.kill()

    def _dispatch(self, pending: _Pending[W]) -> None:
        if pending.suspect:
            # one that killed a worker alone already goes first: its verdict comes after one
            # more run, not after every other suspect's first (a broken environment's first
            # verdict took a death per group in flight)
            first = pending.attempts or pending.grew
            self._suspects.insert(0 if first else len(self._suspects), pending)
            self._run_suspects()
            return
        live = [
            w
            for w in self._workers
            if not w.dead
            and not w.reserved
            and not w.isolating
            and not w.draining
            and w.ready.done()
            and not w.ready.exception()
        ]
        if not live:
            self._waiting.append(pending)
            return
        free = [w for w in live if not w.held] or live
        self._send(min(free, key=lambda w: len(w.inflight)), pending)

    def _send(self, worker: W, pending: _Pending[W]) -> None:
        """Hand ``pending`` to ``worker`` (its bookkeeping here, the bytes by ``_transmit``)."""
        assert self._loop is not None
        pending.worker, pending.started = worker, self._loop.time()
        worker.last_used = pending.started
        worker.inflight.add(pending.request_id)
        self._pending[pending.request_id] = pending
        self._transmit(worker, pending)

    def _run_suspects(self) -> None:
        """Run waiting suspects alone: on workers of their own where the kind starts them
        cheaply (``_isolate``), else on reserved workers that are idle, reserving (draining)
        one more worker while suspects wait and fewer than half the workers are reserved; with
        no suspect left, the reserved workers take ordinary groups again."""
        self._suspects = [p for p in self._suspects if not p.future.done()]
        if self._isolation_capacity():
            self._isolate()
            return
        if not self._suspects:
            # a reserved worker still running a suspect stays reserved until it answers: let go
            # at once (a replacement's start found the queue empty), it took ordinary groups
            # beside the suspect, and the suspect that then killed it was not alone (a Ray run
            # took 4 deaths for one crash, and re-ran 4 innocent groups as suspects)
            released = False
            for worker in self._workers:
                if worker.reserved and not self._runs_suspect(worker):
                    worker.reserved, released = False, True
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

    def _runs_suspect(self, worker: W) -> bool:
        return any(
            pending.suspect
            for pending in map(self._pending.get, worker.inflight)
            if pending is not None and not pending.future.done()
        )

    def _isolate(self) -> None:
        """Suspects in shares (``_take_share``) on workers started for them, up to
        ``_isolation_capacity()`` at once, while the pool's own workers go on with ordinary
        groups: a dead worker's 30 innocent groups take the time of one, not of 30 in a row. A
        worker that answered its share takes the next; with none left they wait
        ``ISOLATION_IDLE_S`` for more, then stop."""
        assert self._loop is not None
        isolating = [w for w in self._workers if w.isolating and not w.dead]
        for worker in isolating:
            if self._suspects and worker.idle():
                for pending in self._take_share(self._suspects):
                    self.isolated += 1
                    self._send(worker, pending)
        if not self._suspects:  # kept a while for the next death's suspects, then stopped
            if isolating and not self._retiring:
                self._retiring = True
                self._loop.call_later(ISOLATION_IDLE_S, self._retire_idle)
            return
        starting = sum(not w.ready.done() for w in isolating)
        wait = self._isolate_after - self._loop.time()
        if wait > 0:  # workers died again and again: not a hot loop
            if not self._isolate_later:
                self._isolate_later = True
                self._loop.call_later(wait, self._isolate_again)
            return
        slots = itertools.count(self.num_workers)
        taken = {w.slot for w in self._workers}
        shares, waiting = 0, list(self._suspects)
        while waiting:  # how many workers the waiting suspects' shares need
            self._take_share(waiting)
            shares += 1
        while shares > starting and len(isolating) < self._isolation_capacity():
            worker = self._spawn(next(slot for slot in slots if slot not in taken))
            worker.isolating = True
            self.isolation_workers += 1
            taken.add(worker.slot)
            isolating.append(worker)
            self._workers.append(worker)
            starting += 1
            worker.ready.add_done_callback(lambda _: self._run_suspects())

    @staticmethod
    def _take_share(suspects: list[_Pending[W]]) -> list[_Pending[W]]:
        """Take from ``suspects`` (in order) what one isolating worker runs together: the first,
        and as many more as every one's ``share`` allows (one that killed a worker alone runs
        alone)."""
        share = [suspects.pop(0)]
        size = share[0].share if not share[0].attempts else 1
        index = 0
        while index < len(suspects) and len(share) < size:
            pending = suspects[index]
            if not pending.attempts and len(share) < pending.share:
                share.append(suspects.pop(index))
                size = min(size, pending.share)
            else:
                index += 1
        return share

    def _stand_ins(self) -> None:
        """One stand-in per worker whose loop is held (``_loop_held``), where workers start
        cheaply: forked for it, it takes the ordinary groups the held worker would have taken
        and the twins of the groups beside the hold, so that the run keeps its workers' worth
        of CPU while one is held for its group's verdict (with one worker, before, nothing ran
        at all). One no longer needed (the loop turned again, or the held worker died) takes no
        new group and stops once its groups are answered (``_retire_if_drained``)."""
        assert self._loop is not None
        if self._closing or self._broken is not None or not self._isolation_capacity():
            return
        held = sum(w.held and not w.dead and not w.isolating for w in self._workers)
        standing = [w for w in self._workers if w.stand_in and not w.dead and not w.draining]
        wanted = min(held, self.num_workers)
        for worker in sorted(standing, key=lambda w: (w.held, len(w.inflight)))[wanted:]:
            worker.draining = True
            self._retire_if_drained(worker)
        slots = itertools.count(self.num_workers)
        for _ in range(wanted - len(standing)):
            taken = {w.slot for w in self._workers}
            worker = self._spawn(next(slot for slot in slots if slot not in taken))
            worker.stand_in = True
            self.stand_ins += 1
            self._workers.append(worker)
            logger.info("worker %d stands in for a worker whose loop is held", worker.slot)
            worker.ready.add_done_callback(lambda _: self._flush_waiting())

    def _retire_if_drained(self, worker: W) -> None:
        if worker.draining and not worker.inflight and not worker.dead and not self._closing:
            self._retire(worker)

    def _isolate_again(self) -> None:
        self._isolate_later = False
        if not self._closing and self._broken is None:
            self._run_suspects()

    def _retire_idle(self) -> None:
        """Stop the workers started for suspects that ran none since ``ISOLATION_IDLE_S`` ago,
        while no suspect waits (a fork and its first group cost a few tenths of a second of
        CPU each: forking four anew at every death doubled a chaos run's CPU)."""
        self._retiring = False
        if self._closing or self._suspects:
            return
        assert self._loop is not None
        now, keep = self._loop.time(), False
        for worker in [w for w in self._workers if w.isolating and not w.dead]:
            if worker.inflight or now - worker.last_used < ISOLATION_IDLE_S:
                keep = True
            else:
                self._retire(worker)
        if keep:
            self._retiring = True
            self._loop.call_later(ISOLATION_IDLE_S, self._retire_idle)

    def _retire(self, worker: W) -> None:
        """Stop a worker started for suspects: none is left (not a death)."""
        worker.dead = True
        if worker in self._workers:
            self._workers.remove(worker)
        worker.kill()

    def _cancel(self, pending: _Pending[W]) -> None:
        """Its caller stopped waiting: it leaves every queue (a suspect withdrawn was still run
        alone later, killing one more worker of a broken environment for no one)."""
        if not pending.future.done():
            pending.future.cancel()
        self._drop(pending)

    def _drop(self, pending: _Pending[W]) -> None:
        """``pending`` leaves every queue and its worker (told so), answered or not."""
        self._pending.pop(pending.request_id, None)
        self._suspects = [p for p in self._suspects if p is not pending]
        self._waiting = [p for p in self._waiting if p is not pending]
        worker = pending.worker
        if worker is not None and not worker.dead:
            worker.inflight.discard(pending.request_id)
            self._withdraw(worker, pending)
            self._retire_if_drained(worker)
            if worker.reserved and not self._closing:  # a withdrawn suspect: the next one
                self._run_suspects()

    def _flush_waiting(self) -> None:
        # also with no suspect left: a reserved worker is then released (a replacement of a
        # reserved worker whose last suspect was convicted as it died stayed reserved, and
        # with one worker the ordinary groups waited forever)
        self._run_suspects()
        waiting, self._waiting = self._waiting, []
        for pending in waiting:
            if not pending.future.done():
                self._dispatch(pending)

    def _died(self, worker: W, reason: str) -> None:
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
            worker.ready.exception()  # read: one nobody waits for (a replacement) is no error
        inflight = [self._pending.pop(r, None) for r in list(worker.inflight)]
        groups = [p for p in inflight if p is not None and not p.future.done()]
        # a worker killed for a group it named is no evidence against one left beside it
        alone = len(groups) == 1 and worker.culprit is None
        for pending in groups:
            if pending.request_id == worker.culprit:  # on the worker's word (_convicted)
                self.named_by_worker += 1
                pending.future.set_result(
                    Response(
                        success=False,
                        error=f"the environment worker running this group {reason} (so the "
                        "worker said); recorded as an error",
                        fault=CULPRIT,
                    )
                )
                continue
            if alone:
                # a kill alone may be a fluke (an OOM kill from outside): run it again; an exit
                # or a segfault alone is its own code's doing, and past its own time limit
                # alone it is what is stuck (a group that yields is answered at its timeout
                # with no retry): the culprit at once
                pending.attempts += 1
            if pending.attempts > self.retries or (
                alone and (worker.stuck or self._own_doing(worker))
            ):
                pending.future.set_result(
                    Response(
                        success=False,
                        error=f"the environment worker running this group alone {reason}, "
                        f"{pending.attempts} time(s): this group is what kills it; recorded "
                        "as an error",
                        fault=CULPRIT,
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
        assert self._loop is not None
        if worker.isolating:  # not replaced: _isolate starts what the suspects need
            self._isolate_after = self._loop.time() + pause
            if worker in self._workers:
                self._workers.remove(worker)
        if worker.stand_in and worker in self._workers:  # not replaced: _stand_ins says
            self._workers.remove(worker)
        # beside others, not guilty yet: isolated now. Where workers start cheaply, the groups
        # in flight are shared among up to _isolation_capacity() workers started for them, at
        # once (a worker that dies beside 15 groups: 4 workers of 4 groups; one of those dying:
        # 4 workers of 1), so most are cleared in the time of one run; run each alone, 15
        # suspects queued on 4 workers behind the slow ones (a hang's timeout, an endpoint's
        # retries) and held their share of -c meanwhile. Elsewhere each runs alone.
        # a group whose twin still runs elsewhere is carried by it (not run a third time)
        for pending in groups:
            if pending.twin is not None and not pending.is_twin and not pending.future.done():
                pending.worker, pending.started = None, None
        left = [p for p in groups if not p.future.done() and p.worker is worker]
        spread = max(self._isolation_capacity(), 1)
        # over its memory budget, the worker named the group whose code was running: it runs
        # alone, first, and the others share the other workers (before, the grower was found by
        # halving: a worker over 30 groups took four deaths, each a blow-up past the budget)
        grower = next((p for p in left if p.request_id == worker.grower), None)
        if grower is not None and len(left) > 1:
            self.grower_named += 1
            grower.grew, grower.share = True, 1
            left.remove(grower)
            share = -(-len(left) // (spread - 1)) if spread > 1 else 1
            left.insert(0, grower)
        else:
            share = -(-len(left) // spread) if spread > 1 else 1
        for pending in left:
            # beside a culprit its worker named, the death is explained: runs again as any group
            pending.suspect = pending.suspect or worker.culprit is None
            if pending is not grower:
                pending.share = share
            pending.started = None
            self._dispatch(pending)
        if worker.isolating:
            self._run_suspects()
        elif pause:
            self._loop.call_later(pause, self._replace, worker)
        else:
            self._replace(worker)
        self._stand_ins()

    def _replace(self, worker: W) -> None:
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

    def _give_up(self, worker: W, reason: str, groups: list[_Pending[W]]) -> None:
        """Too many deaths with nothing answered between them: restarting is a hot loop that
        helps nobody. Every group is answered with why, and so is every later one."""
        self._broken = (
            f"the environment workers for {self.env_id} died {self._deaths_in_a_row} times in a "
            f"row without finishing a group (the last {reason}); no longer restarting them"
        )
        logger.error("%s", self._broken)
        for pending in [*groups, *self._pending.values(), *self._waiting, *self._suspects]:
            if not pending.future.done():
                pending.future.set_result(
                    Response(success=False, error=self._broken, fault=UNAVAILABLE)
                )
        self._pending.clear()
        self._waiting.clear()
        self._suspects.clear()
        for other in self._workers:
            if other is not worker and other.alive():
                other.kill()


def default_max_deaths(workers: int) -> int:
    """``$VF_WORKER_MAX_DEATHS``, else ``4 * workers + 8``: enough for every worker to die
    beside others and each of its groups to be run alone, before a pool gives up."""
    configured = os.environ.get("VF_WORKER_MAX_DEATHS", "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return 4 * workers + 8
