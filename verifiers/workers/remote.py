"""The caller's side of ``vf-env-server``: one or more servers used as one pool of workers.

Each address gets a DEALER socket (CURVE-secured with the shared secret unless the server runs
``--no-auth``); a group goes to the server with the fewest groups in flight. A server that does
not answer a group within its timeout (plus a grace period), or whose connection fails, is
passed over for that group, which is sent once to another server; a group no server answered is
an error on its rollouts. ``start`` checks every server answers a health probe first.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

from verifiers.errors import EnvWorkerError
from verifiers.workers.protocol import HEALTH_PING, Response, RunGroupRequest, pack, unpack

TIMEOUT_GRACE = 30.0
_ids = itertools.count()


# the ZeroMQ monitor events a caller sees when the two sides' locks differ: which one depends
# on which side noticed first, so they are reported as one
HANDSHAKE_REFUSALS = (
    "HANDSHAKE_FAILED_NO_DETAIL",
    "HANDSHAKE_FAILED_AUTH",
    "HANDSHAKE_FAILED_PROTOCOL",
)


@dataclass
class _Server:
    address: str
    socket: Any
    inflight: dict[bytes, asyncio.Future[Response]] = field(default_factory=dict)
    receiver: asyncio.Task[None] | None = None
    monitor: Any = None  # the socket's handshake events, until the first answer


def normalize_address(address: str) -> str:
    """``host:port`` (or ``tcp://host:port``) as a ZeroMQ endpoint."""
    address = address.strip()
    if address.startswith("tcp://"):
        return address
    if ":" not in address:
        raise ValueError(f"an env server address is HOST:PORT, got {address!r}")
    return f"tcp://{address}"


class RemoteWorkers:
    """``vf-env-server`` processes at ``addresses`` (see the module docstring)."""

    def __init__(
        self, addresses: list[str], secret: str | None, *, connect_timeout: float = 10.0
    ) -> None:
        if not addresses:
            raise ValueError("RemoteWorkers needs at least one env server address")
        self.addresses = [normalize_address(a) for a in addresses]
        self.secret = secret
        self.connect_timeout = connect_timeout
        self._servers: list[_Server] = []
        self._ctx: Any = None

    async def start(self) -> RemoteWorkers:
        import zmq
        import zmq.asyncio

        from verifiers.workers.auth import secure_client

        self._ctx = zmq.asyncio.Context()
        for address in self.addresses:
            sock = self._ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            if self.secret is not None:
                secure_client(sock, self.secret)
            events = zmq.EVENT_HANDSHAKE_SUCCEEDED
            for name in HANDSHAKE_REFUSALS:
                events |= getattr(zmq, f"EVENT_{name}")
            server = _Server(address, sock, monitor=sock.get_monitor_socket(events))
            sock.connect(address)
            server.receiver = asyncio.create_task(self._receive(server))
            self._servers.append(server)
        await asyncio.gather(*(self._ping(s) for s in self._servers))
        return self

    async def _ping(self, server: _Server) -> None:
        """An answer to a health probe, or the reason there is none: a refused handshake is
        said at once (a wrong secret is never answered, so it would otherwise read as a
        server that is down)."""
        request_id = f"h{next(_ids)}".encode()
        future = asyncio.get_running_loop().create_future()
        server.inflight[request_id] = future
        await server.socket.send_multipart([request_id, HEALTH_PING])
        refusal = asyncio.ensure_future(self._handshake_refusal(server))  # (events queue meanwhile)
        try:
            await asyncio.wait(
                (future, refusal), timeout=self.connect_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            refusal.cancel()
            server.inflight.pop(request_id, None)
            if not server.socket.closed:  # (another server's failure closed them all)
                server.socket.disable_monitor()
            server.monitor.close()
        if future.done():
            return
        await self.close()
        if refusal.done() and not refusal.cancelled():
            raise EnvWorkerError(f"the env server at {server.address} {refusal.result()}")
        raise EnvWorkerError(
            f"the env server at {server.address} did not answer within "
            f"{self.connect_timeout:g}s: is it running at that address?"
        )

    @staticmethod
    async def _handshake_refusal(server: _Server) -> str:
        """Why the server refused this caller's handshake, once it has (never returns if not)."""
        import zmq
        from zmq.utils.monitor import parse_monitor_message

        while True:
            event = parse_monitor_message(await server.monitor.recv_multipart())["event"]
            if zmq.Event(event).name in HANDSHAKE_REFUSALS:
                return (
                    "refused the handshake: the two sides' secrets differ, or one side runs "
                    "--no-auth and the other has a secret"
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

    async def run_group(self, request: RunGroupRequest) -> Response:
        payload = pack(request)
        # the worker answers a timed-out group itself when its code yields; one stuck in code
        # that will not yield is given as long again (at most TIMEOUT_GRACE) before it is killed
        limit = (
            request.timeout + min(TIMEOUT_GRACE, max(2.0, request.timeout))
            if request.timeout
            else None
        )
        tried: list[str] = []
        for _ in range(min(2, len(self._servers))):
            candidates = [s for s in self._servers if s.address not in tried]
            server = min(candidates, key=lambda s: len(s.inflight))
            tried.append(server.address)
            request_id = f"g{next(_ids)}".encode()
            future = asyncio.get_running_loop().create_future()
            server.inflight[request_id] = future
            try:
                await server.socket.send_multipart([request_id, payload])
                return await asyncio.wait_for(asyncio.shield(future), limit)
            except TimeoutError:
                continue
            except asyncio.CancelledError:
                await server.socket.send_multipart([request_id, b""])
                raise
            finally:
                server.inflight.pop(request_id, None)
        return Response(
            success=False, error=f"no env server answered this group (tried {', '.join(tried)})"
        )

    async def close(self) -> None:
        for server in self._servers:
            if server.receiver is not None:
                server.receiver.cancel()
            server.monitor.close()
            server.socket.close()
        self._servers = []
        if self._ctx is not None:
            self._ctx.term()
            self._ctx = None

    def describe(self) -> dict[str, Any]:
        return {"kind": "remote", "servers": list(self.addresses)}
