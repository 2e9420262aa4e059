"""The caller's side of ``vf-env-server``: one or more servers used as one pool of workers.

Each address gets a DEALER socket (CURVE-secured with the shared secret unless the server runs
``--no-auth``); a group goes to the live server with the fewest groups in flight. ``start``
checks every server answers a health probe first.

Faults cost only their own, as in a local pool. A worker that dies inside a server is that
server's to handle (its ``WorkerPool`` runs the groups beside it again alone and answers the
culprit with an error naming the cause). A server that goes away (its process killed, its
machine gone: the connection closes, or ZMTP heartbeats stop answering) runs no environment
code itself, so nothing it was running is guilty: its groups in flight are sent again to the
other servers without spending an attempt, and a group in flight on ``max_losses`` servers that
went away is recorded as an error saying so (the bound that keeps one group from taking every
server down). A server that is down gets no groups: ZeroMQ reconnects to it with a growing pause
(at most ``RECONNECT_MAX_MS`` apart), one warning says so, and it takes groups again once its
handshake succeeds and it answers a health probe. A server whose own worker pool gave up (its
workers died again and again: the environment crashes there) is down too: it answers its groups
and its health probe ``UNAVAILABLE``, its groups go to the other servers (a loss each, as above),
and it takes groups again once restarted. A server's verdict that a group is the culprit (it
killed that server's workers while running alone) is checked once on another live server before
it is recorded: a server whose environment kills every worker condemns each group it gets until
its pool gives up, and those groups are innocent; condemned by two servers, or by the only one
live, the group is an error with the cause; a server two of whose verdicts in a row another
server overturned (it ran the group fine) is broken, and down at once until restarted, its groups
in flight sent elsewhere. With every server down, groups wait up to
``reconnect_timeout`` for one to come back, then are errors naming each server and why it is
down. A group past its timeout (plus a grace period) stays with its server while the server
answers a health probe (its pool enforces the timeout, counting only the time a worker runs the
group); a server that does not answer the probe is passed over for that group, which is sent
once to another server; a group no server answered is an error on its rollouts.

Over 400 lines, not split: one class whose routing, each server's health and the check of a
server's verdicts all read and change the same table of servers and their groups in flight.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

from verifiers.errors import EnvWorkerError
from verifiers.workers.protocol import (
    CULPRIT,
    HEALTH_PING,
    UNAVAILABLE,
    Response,
    RunGroupRequest,
    pack,
    unpack,
)

logger = logging.getLogger("verifiers.workers.remote")
TIMEOUT_GRACE = 30.0
HEARTBEAT_MS = 1000  # a ZMTP ping this often: a server whose machine vanished is noticed
HEARTBEAT_TIMEOUT_MS = 15000  # without an answer this long, the connection is dropped
RECONNECT_MS, RECONNECT_MAX_MS = 250, 5000  # reconnection attempts, doubling up to the max
_ids = itertools.count()
UNAVAILABLE_REASON = "stopped running groups (its worker pool gave up)"
MAX_OVERTURNED = 2  # a server's culprit verdicts, in a row, that other servers ran fine
BROKEN_REASON = (
    "condemned {count} groups in a row that another server ran fine (its environment is "
    "broken there)"
)


# the ZeroMQ monitor events a caller sees when the two sides' locks differ: which one depends
# on which side noticed first, so they are reported as one
HANDSHAKE_REFUSALS = (
    "HANDSHAKE_FAILED_NO_DETAIL",
    "HANDSHAKE_FAILED_AUTH",
    "HANDSHAKE_FAILED_PROTOCOL",
)
REFUSED = (
    "refused the handshake (closed the connection during it): it turns connections away past "
    "its limits (too many mid-handshake from this user or address, or in all: its log says "
    "so), and refuses a secret that differs from its own, or one side with a secret when the "
    "other runs --no-auth"
)


@dataclass
class _Server:
    address: str
    socket: Any
    monitor: Any  # the socket's connection events, read by ``watcher``
    refused: asyncio.Future[str]  # why the server refused the handshake, once it has
    # answers by request id; ``None`` is the answer of a server that went away
    inflight: dict[bytes, asyncio.Future[Response | None]] = field(default_factory=dict)
    receiver: asyncio.Task[None] | None = None
    watcher: asyncio.Task[None] | None = None
    rejoining: asyncio.Task[None] | None = None  # the health probe of a server back
    down: str | None = None  # why it takes no groups now
    down_since: float = 0.0  # (loop time)
    overturned: int = 0  # its culprit verdicts another server ran fine, none answered between


def normalize_address(address: str) -> str:
    """``host:port`` (or ``tcp://host:port``) as a ZeroMQ endpoint."""
    address = address.strip()
    if address.startswith("tcp://"):
        return address
    if ":" not in address:
        raise ValueError(f"an env server address is HOST:PORT, got {address!r}")
    return f"tcp://{address}"


class RemoteWorkers:
    """``vf-env-server`` processes at ``addresses`` (see the module docstring).

    Args:
        connect_timeout: seconds each server has to answer the health probe of ``start``.
        reconnect_timeout: seconds a group waits for a server to come back when every server
            is down, counted from when the last one went down.
        max_losses: servers that went away while running a group after which that group is
            an error on its rollouts.
    """

    def __init__(
        self,
        addresses: list[str],
        secret: str | None,
        *,
        connect_timeout: float = 10.0,
        reconnect_timeout: float = 60.0,
        max_losses: int = 3,
    ) -> None:
        if not addresses:
            raise ValueError("RemoteWorkers needs at least one env server address")
        if max_losses < 1:
            raise ValueError(f"max_losses must be at least 1, got {max_losses}")
        self.addresses = [normalize_address(a) for a in addresses]
        self.secret = secret
        self.connect_timeout, self.reconnect_timeout = connect_timeout, reconnect_timeout
        self.max_losses = max_losses
        self.servers_lost = 0  # times a server went away
        self.rerun = 0  # groups sent again because their server went away
        self.rechecked = 0  # groups a server condemned, run once more on another
        self._servers: list[_Server] = []
        self._ctx: Any = None
        self._changed: asyncio.Event | None = None  # set when a server comes back or we close
        self._closed = False
        self._started = False

    async def start(self) -> RemoteWorkers:
        import zmq
        import zmq.asyncio

        from verifiers.workers.auth import secure_client

        loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        self._ctx = zmq.asyncio.Context()
        events = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
        for name in HANDSHAKE_REFUSALS:
            events |= getattr(zmq, f"EVENT_{name}")
        for address in self.addresses:
            sock = self._ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_MS)
            sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
            sock.setsockopt(zmq.RECONNECT_IVL, RECONNECT_MS)
            sock.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_MAX_MS)
            if self.secret is not None:
                secure_client(sock, self.secret)
            server = _Server(address, sock, sock.get_monitor_socket(events), loop.create_future())
            sock.connect(address)
            server.receiver = asyncio.create_task(self._receive(server))
            server.watcher = asyncio.create_task(self._watch(server))
            self._servers.append(server)
        await asyncio.gather(*(self._ping(s) for s in self._servers))
        if all(s.down is not None for s in self._servers):
            down = "; ".join(f"{s.address} {s.down}" for s in self._servers)
            await self.close()
            raise EnvWorkerError(f"no env server can run groups: {down}")
        self._started = True
        return self

    async def _probe(
        self, server: _Server, *also: asyncio.Future[Any]
    ) -> asyncio.Future[Response | None]:
        """A health probe sent to ``server``, waited for up to ``connect_timeout`` (or until one
        of ``also`` is done): its future, not done when it went unanswered, ``None`` when the
        server went away meanwhile."""
        request_id = f"h{next(_ids)}".encode()
        probe: asyncio.Future[Response | None] = asyncio.get_running_loop().create_future()
        server.inflight[request_id] = probe
        try:
            await server.socket.send_multipart([request_id, HEALTH_PING])
            await asyncio.wait(
                (probe, *also), timeout=self.connect_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            server.inflight.pop(request_id, None)
        return probe

    async def _ping(self, server: _Server) -> None:
        """An answer to a health probe, or the reason there is none: a refused handshake is
        said at once (a wrong secret is never answered, so it would otherwise read as a
        server that is down). A server that answers that its pool gave up is down."""
        future = await self._probe(server, server.refused)
        if future.done() and (answer := future.result()) is not None:
            if not answer.success:
                self._unavailable(server, answer.error)
            return
        refused = server.refused.done()  # before close(), which cancels it
        await self.close()
        if refused:
            raise EnvWorkerError(f"the env server at {server.address} {server.refused.result()}")
        raise EnvWorkerError(
            f"the env server at {server.address} did not answer within "
            f"{self.connect_timeout:g}s: is it running at that address?"
        )

    async def _watch(self, server: _Server) -> None:
        """The connection's events: a refused handshake (said by ``start``), a connection
        that closed or stopped answering heartbeats (the server went away), a handshake that
        succeeded again (it is back)."""
        import zmq
        from zmq.utils.monitor import parse_monitor_message

        while True:
            event = zmq.Event(parse_monitor_message(await server.monitor.recv_multipart())["event"])
            if event.name in HANDSHAKE_REFUSALS:
                if not server.refused.done():
                    server.refused.set_result(REFUSED)
                self._lost(server, REFUSED)
            elif event == zmq.EVENT_DISCONNECTED:
                self._lost(server, "closed the connection or stopped answering heartbeats")
            elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED and server.down is not None:
                server.rejoining = asyncio.create_task(self._rejoin(server))

    async def _rejoin(self, server: _Server) -> None:
        """A server that is down connected again: it takes groups once it answers a health
        probe as healthy (a server whose pool gave up reconnects as it was, still down)."""
        probe = await self._probe(server)
        if not probe.done() or (answer := probe.result()) is None:
            return  # gone again: its next handshake tries again
        if not answer.success:
            server.down = f"{UNAVAILABLE_REASON}: {answer.error}"
            return
        logger.warning("env server %s is back: sending it groups again", server.address)
        server.down, server.overturned = None, 0
        assert self._changed is not None
        self._changed.set()

    def _unavailable(self, server: _Server, error: str | None) -> None:
        """The server answered that its worker pool gave up: down until it is restarted (its
        groups in flight were answered so by its pool, and go elsewhere)."""
        if server.down is not None:
            return
        server.down = f"{UNAVAILABLE_REASON}: {error or 'its pool gave up'}"
        server.down_since = asyncio.get_running_loop().time()
        self.servers_lost += 1
        logger.warning(
            "env server %s %s; sending its groups to the other servers until it is restarted",
            server.address,
            server.down,
        )

    def _lost(self, server: _Server, reason: str) -> None:
        """The server went away: what it was running is answered ``None`` (run elsewhere)."""
        if server.down is not None:
            return
        server.down, server.down_since = reason, asyncio.get_running_loop().time()
        self.servers_lost += 1
        groups = [f for f in server.inflight.values() if not f.done()]
        for future in groups:
            future.set_result(None)
        if not self._started:
            return  # ``start`` says why it failed
        logger.warning(
            "env server %s %s with %d group(s) in flight: running them on the other servers "
            "(not counted against them); reconnecting with a growing pause, up to %gs apart",
            server.address,
            reason,
            len(groups),
            RECONNECT_MAX_MS / 1000,
        )

    async def _receive(self, server: _Server) -> None:
        while True:
            frames = await server.socket.recv_multipart()
            if len(frames) != 2:
                continue
            future = server.inflight.pop(frames[0], None)
            if future is not None and not future.done():
                try:
                    future.set_result(Response.model_validate(unpack(frames[1])))
                except Exception as exc:
                    future.set_result(Response(success=False, error=f"unreadable reply: {exc}"))

    async def _choose(self, passed_over: list[str]) -> _Server | str:
        """The least busy live server not passed over, waiting for one to come back while
        every one is down (up to ``reconnect_timeout`` after the last went down); else why
        there is none."""
        if self._changed is None:
            raise EnvWorkerError(
                "RemoteWorkers were used before they were started: "
                "`workers = await RemoteWorkers([...], secret).start()` first"
            )
        loop = asyncio.get_running_loop()
        while True:
            if self._closed:
                return "the env servers were closed"
            candidates = [s for s in self._servers if s.address not in passed_over]
            live = [s for s in candidates if s.down is None]
            if live:
                return min(live, key=lambda s: len(s.inflight))
            if not candidates:
                return f"no env server answered this group (tried {', '.join(passed_over)})"
            left = max(s.down_since for s in candidates) + self.reconnect_timeout - loop.time()
            if left <= 0:
                return (
                    "every env server is down ("
                    + "; ".join(f"{s.address} {s.down}" for s in candidates)
                    + f"), none back within {self.reconnect_timeout:g}s"
                )
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                pass

    async def _answer(
        self, server: _Server, future: asyncio.Future[Response | None], limit: float | None
    ) -> Response | None:
        """The server's answer (``None``: it went away). Past ``limit`` the group is not given
        up while the server answers a health probe, once per ``limit``: the server's pool
        enforces the group's timeout itself, counting only time in a worker, so a group queued
        behind suspects run alone is late, not lost (giving it up made innocent groups errors).
        A server that does not answer the probe within ``connect_timeout`` raises
        ``TimeoutError``: it is passed over for this group."""
        if limit is None:
            return await asyncio.shield(future)
        while True:
            await asyncio.wait({future}, timeout=limit)
            if future.done():
                return future.result()
            probe = await self._probe(server, future)
            if future.done():
                return future.result()
            if not probe.done() or probe.result() is None:
                raise TimeoutError

    async def run_group(self, request: RunGroupRequest) -> Response:
        payload = pack(request)
        # the worker answers a timed-out group itself when its code yields; one stuck in code
        # that will not yield is given as long again (at most TIMEOUT_GRACE) before it is killed
        limit = (
            request.timeout + min(TIMEOUT_GRACE, max(2.0, request.timeout))
            if request.timeout
            else None
        )
        passed_over: list[str] = []  # servers that did not answer it in time
        losses: list[str] = []  # servers that went away while running it
        verdict: Response | None = None  # a server's culprit verdict, being checked elsewhere
        condemned: list[str] = []  # the server that gave it
        while True:
            server = await self._choose([*passed_over, *condemned])
            if isinstance(server, str):
                return verdict or Response(success=False, error=server)
            request_id = f"g{next(_ids)}".encode()
            future: asyncio.Future[Response | None] = asyncio.get_running_loop().create_future()
            server.inflight[request_id] = future
            try:
                await server.socket.send_multipart([request_id, payload])
                response = await self._answer(server, future, limit)
            except TimeoutError:
                if server.down is None:  # should it answer after all, it need not run it
                    await server.socket.send_multipart([request_id, b""])
                passed_over.append(server.address)
                if verdict is not None:
                    return verdict
                if len(passed_over) >= min(2, len(self._servers)):
                    return Response(
                        success=False,
                        error=f"no env server answered this group (tried {', '.join(passed_over)})",
                    )
                continue
            except asyncio.CancelledError:
                if server.down is None:
                    await server.socket.send_multipart([request_id, b""])
                raise
            finally:
                server.inflight.pop(request_id, None)
            if response is not None and response.fault == UNAVAILABLE:
                self._unavailable(server, response.error)
                response = None  # not run there: elsewhere, as for a server that went away
            if response is not None:
                excluded = [*passed_over, *condemned, server.address]
                if response.fault == CULPRIT and verdict is None and self._live_besides(excluded):
                    verdict = response
                    condemned.append(server.address)
                    self.rechecked += 1
                    continue
                if response.fault != CULPRIT:
                    server.overturned = 0  # it ran a group: sound, as far as anyone knows
                    if verdict is not None:  # the condemning server was wrong about it
                        self._overturn(condemned[0])
                return response
            if verdict is not None:
                return verdict  # no second server could check it
            losses.append(f"{server.address} {server.down}")
            if len(losses) >= self.max_losses:
                return Response(
                    success=False,
                    error=f"{len(losses)} env servers went away while running this group (the "
                    f"last: {losses[-1]}); recorded as an error",
                )
            self.rerun += 1

    def _overturn(self, address: str) -> None:
        """A server condemned a group that another ran fine. Its pool gives up only after many
        deaths (its share of groups lost for half a minute and more, each condemned and run
        again elsewhere): ``MAX_OVERTURNED`` such verdicts in a row, with no group answered
        between them, and it is down at once, its groups in flight sent to the other servers
        (not counted against them) and withdrawn there. Down until it is restarted, as a
        server whose pool gave up (its connection never drops, so it never rejoins before)."""
        server = next((s for s in self._servers if s.address == address), None)
        if server is None or server.down is not None:
            return
        server.overturned += 1
        if server.overturned < MAX_OVERTURNED:
            return
        server.down = BROKEN_REASON.format(count=server.overturned)
        server.down_since = asyncio.get_running_loop().time()
        self.servers_lost += 1
        groups = [(r, f) for r, f in server.inflight.items() if r[:1] == b"g" and not f.done()]
        for request_id, future in groups:
            future.set_result(None)
            cancel = server.socket.send_multipart([request_id, b""])
            cancel.add_done_callback(lambda done: done.cancelled() or done.exception())
        logger.warning(
            "env server %s %s; running its %d group(s) in flight on the other servers, and "
            "sending it none until it is restarted",
            server.address,
            server.down,
            len(groups),
        )

    def _live_besides(self, excluded: list[str]) -> bool:
        return any(s.down is None and s.address not in excluded for s in self._servers)

    async def close(self) -> None:
        """Close the sockets; groups still waiting are answered with an error."""
        self._closed = True
        if self._changed is not None:
            self._changed.set()
        for server in self._servers:
            for future in server.inflight.values():
                if not future.done():
                    future.set_result(Response(success=False, error="the env servers were closed"))
            for task in (server.receiver, server.watcher, server.rejoining):
                if task is not None:
                    task.cancel()
            if not server.refused.done():
                server.refused.cancel()
            if not server.socket.closed:
                server.socket.disable_monitor()
            server.monitor.close(linger=0)
            server.socket.close()
        self._servers = []
        if self._ctx is not None:
            self._ctx.term()
            self._ctx = None

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "remote",
            "servers": list(self.addresses),
            "servers_lost": self.servers_lost,
            "rerun": self.rerun,
            "rechecked": self.rechecked,
            "down": [s.address for s in self._servers if s.down is not None],
            "down_reasons": {s.address: s.down for s in self._servers if s.down is not None},
        }
