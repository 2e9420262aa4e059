"""vf-env-server's front door: every TCP connection passes a per-peer gate before libzmq sees it.

libzmq tells a server that a CurveZMQ handshake failed, never from whom (its monitor names the
listening address), so a throttle inside it could only be the listener's: one stranger guessing
the secret locked out every caller. The gate accepts each connection itself, so it knows the
peer, and relays it to the ROUTER on a Unix socket in a private directory (no other local user
can connect there and skip the gate). It reads only the first command each way: a client's
HELLO (a guess of the secret: CURVE's first command, encrypted to the server's key the secret
derives) spends one of its peer's tokens before libzmq sees it, and the server's READY (the
handshake succeeded) gives the token back and lets the connection through untouched. A peer
without a token is closed at once, so guesses cost it ``rate`` a second after a first
``burst``; connections it opened beforehand each still need a token for their HELLO; and a
peer holds at most ``max_pending`` connections that have not finished the handshake, each for
at most ``handshake_s``. Other peers, and callers that completed a handshake, are untouched.
The gate relays no more connections than the process has descriptors for (libzmq's IPC
listener aborts the process when ``accept`` meets EMFILE), at most half of them mid-handshake:
past that, new ones are closed.

Up to the handshake's end, bytes go from transport to transport (asyncio protocols: a callback
and a ``send`` per read, into a buffer each side keeps, no streams), on the server's own event
loop; past it, both sockets are taken from asyncio and relayed in the kernel
(``verifiers.workers.spliced``: ``os.splice`` through a pipe each way, the relay's bounds kept),
where the protocols had cost ~0.5 ms of the server's CPU a MiB relayed. On a thread of its own,
through streams, the gate cost a one-rollout group ~90 us of CPU (~15% of the server's), mostly
handing the GIL back and forth with the loop; here it costs what the socket calls do
(``benchmarks/env_workers.py``).

The module is over 400 lines because admission, the handshake watch and the relay's protocols
share one piece of bookkeeping per relay (its peer's budget, the gate's counts, the deadline);
what needs none of it, the relay past the handshake, is a module of its own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from verifiers.asgi.peers import peer_of
from verifiers.workers.spliced import AVAILABLE, PIPE_DESCRIPTORS, SplicedRelay

logger = logging.getLogger("verifiers.workers.gate")
GREETING_BYTES = 64
"""A ZMTP 3 greeting (signature, version, mechanism, as-server, filler)."""
MAX_HANDSHAKE_COMMAND = 1024
"""A handshake command is a few hundred bytes (HELLO 200); a larger first frame is not one."""
COMMAND, LONG = 0x04, 0x02
"""ZMTP frame flags: a command, and a size of 8 bytes rather than 1."""


def peer_key(address: Any, local: Any = None) -> str:
    """Whom a connection is charged to (``verifiers.asgi.peers``): its IPv4 address, its IPv6
    /64, or this machine's user that owns it (every 127/8 address of one user is one peer)."""
    if not isinstance(address, tuple):
        return peer_of(str(address))
    return peer_of(str(address[0]), address[1], tuple(local[:2]) if local else None)


@dataclass
class Peer:
    """One peer's handshake budget: ``tokens`` refill at the gate's rate up to its burst."""

    tokens: float
    last: float
    pending: int = 0


class PeerBudgets:
    """Every peer's :class:`Peer`, at most ``max_peers`` of them: past that the one seen least
    recently is forgotten (it starts again with a full burst), so strangers at many addresses
    cost bounded memory; they get ``burst`` guesses per address per ``max_peers`` addresses
    cycled, which is what one budget per address allows."""

    def __init__(
        self,
        *,
        rate: float = 2.0,
        burst: int = 10,
        max_pending: int = 8,
        max_peers: int = 4096,
    ) -> None:
        if rate <= 0 or burst < 1 or max_pending < 1 or max_peers < 1:
            raise ValueError("rate must be positive; burst, max_pending and max_peers at least 1")
        self.rate, self.burst = rate, burst
        self.max_pending, self.max_peers = max_pending, max_peers
        self.peers: OrderedDict[str, Peer] = OrderedDict()
        self.warned = -60.0

    def get(self, key: str, now: float) -> Peer:
        """``key``'s budget, refilled to ``now`` (monotonic seconds)."""
        peer = self.peers.get(key)
        if peer is None:
            peer = self.peers[key] = Peer(tokens=float(self.burst), last=now)
            while len(self.peers) > self.max_peers:
                self.peers.popitem(last=False)
            return peer
        self.peers.move_to_end(key)
        return self._refill(peer, now)

    def _refill(self, peer: Peer, now: float) -> Peer:
        peer.tokens = min(float(self.burst), peer.tokens + (now - peer.last) * self.rate)
        peer.last = now
        return peer

    def admits(self, key: str, now: float) -> Peer | None:
        """``key``'s budget if it may open one more connection, else ``None``."""
        peer = self.get(key, now)
        return peer if peer.tokens >= 1 and peer.pending < self.max_pending else None

    def spend(self, key: str, peer: Peer, now: float) -> bool:
        """One HELLO from ``key``: a token spent, or ``False`` when it has none left (the
        connection's own ``peer`` is charged even if the table forgot it meanwhile)."""
        if self.peers.get(key) is peer:
            self.peers.move_to_end(key)
        if self._refill(peer, now).tokens < 1:
            if now - self.warned > 60:
                self.warned = now
                logger.warning(
                    "%s keeps failing handshakes (without the secret, or guessing it): its "
                    "connections are closed a while; other peers' are not",
                    key,
                )
            return False
        peer.tokens -= 1
        return True

    def succeeded(self, peer: Peer) -> None:
        """A handshake its HELLO paid for went through: the token comes back."""
        peer.tokens = min(float(self.burst), peer.tokens + 1)


class Gate:
    """A TCP listener relaying each admitted connection to ``upstream`` (a Unix socket)."""

    def __init__(self, upstream: str, budgets: PeerBudgets, *, handshake_s: float = 10.0) -> None:
        from verifiers.processes.open_files import descriptors_to_spare

        self.upstream, self.budgets, self.handshake_s = upstream, budgets, handshake_s
        # each relay holds 3 descriptors: the peer's, the gate's to the ROUTER, libzmq's end,
        # and a spliced one 4 more (its pipes); at most half of them mid-handshake, so callers
        # through keep room to reconnect
        self.descriptors = descriptors_to_spare(1)
        self.relays, self.max_relays, self.spliced = 0, self.descriptors // 3, 0
        self.pending, self.warned = 0, -60.0
        self.live: set[_Relay] = set()

    async def start(self, listener: Any) -> asyncio.Server:
        from verifiers.processes.open_files import ACCEPT_BURST

        return await asyncio.get_running_loop().create_server(
            lambda: _FromClient(self), sock=listener, backlog=ACCEPT_BURST
        )

    def admit(self, transport: asyncio.Transport) -> _Relay | None:
        """A relay for a connection just accepted, or ``None`` (it is aborted) when its peer
        has no token or too many connections mid-handshake, or the gate is full."""
        key = peer_key(transport.get_extra_info("peername"), transport.get_extra_info("sockname"))
        peer = self.budgets.admits(key, time.monotonic())
        full = self.held(3) > self.descriptors or self.pending >= self.max_relays // 2
        if peer is None or full:
            if full and time.monotonic() - self.warned > 60:
                self.warned = time.monotonic()
                logger.warning(
                    "turning connections away: %d relays, %d mid-handshake (this process has "
                    "descriptors for %d)",
                    self.relays,
                    self.pending,
                    self.max_relays,
                )
            transport.abort()
            return None
        return _Relay(self, key, peer, transport)

    def held(self, more: int = 0) -> int:
        """Descriptors the relays hold, with ``more``."""
        return 3 * self.relays + PIPE_DESCRIPTORS * self.spliced + more

    def close_all(self) -> None:
        """End every relay, both of its connections at once."""
        for relay in list(self.live):
            relay.close(flush=False)


class _Relay:
    """One admitted connection: the client's transport and the ROUTER's, relayed by the two
    protocols below, then (past the handshake, where ``os.splice`` is) by a
    :class:`SplicedRelay`. It counts as mid-handshake (its peer's and the gate's) until the
    server's READY, and is closed if that has not come within ``handshake_s``. When either side
    ends, both are closed: at once before the handshake went through, else after what is already
    buffered for the other side is written (``handshake_s`` at most)."""

    def __init__(self, gate: Gate, key: str, peer: Peer, client: asyncio.Transport) -> None:
        self.gate, self.key, self.peer, self.client = gate, key, peer, client
        self.upstream: asyncio.Transport | None = None
        self.ready = self.charged = self.closed = False
        self.spliced: SplicedRelay | None = None
        self.spliceable = False  # through, and not yet spliced
        loop = asyncio.get_running_loop()
        self.deadline = loop.call_later(gate.handshake_s, self.close, False)
        peer.pending += 1
        gate.pending += 1
        gate.relays += 1
        gate.live.add(self)
        client.pause_reading()  # until the ROUTER's end is open
        self.connecting = loop.create_task(self._connect())

    async def _connect(self) -> None:
        try:
            await asyncio.get_running_loop().create_unix_connection(
                lambda: _FromServer(self), self.gate.upstream
            )
        except OSError as exc:  # out of descriptors, or the server is going away
            logger.debug("could not relay a connection from %s: %s", self.key, exc)
            self.close(flush=False)

    def opened(self, upstream: asyncio.Transport) -> None:
        """The ROUTER's end is open: the client is read from now on."""
        self.upstream = upstream
        if self.closed:
            upstream.abort()
        else:
            self.client.resume_reading()

    def spend(self) -> bool:
        """The client's HELLO (a guess of the secret): its peer's token, or ``False``."""
        self.charged = self.gate.budgets.spend(self.key, self.peer, time.monotonic())
        return self.charged

    def through(self) -> None:
        """The server's READY: the handshake went through (and its token comes back)."""
        self.ready = True
        self.deadline.cancel()
        self.peer.pending -= 1
        self.gate.pending -= 1
        if self.charged:
            self.gate.budgets.succeeded(self.peer)
        if AVAILABLE and self.upstream is not None:
            self.spliceable = True
            for transport in (self.client, self.upstream):
                transport.set_write_buffer_limits(high=0)  # told when each is drained
            self.splice()

    def splice(self) -> None:
        """Past the handshake, once neither transport holds unwritten bytes: both sockets taken
        from asyncio and relayed in the kernel (``verifiers.workers.spliced``). Without room for
        its pipes (the gate's descriptors, or the process's) it stays on the protocols."""
        upstream = self.upstream
        if not self.spliceable or self.closed or upstream is None:
            return
        if self.client.get_write_buffer_size() or upstream.get_write_buffer_size():
            return  # again when drained (``_Side.resume_writing``)
        if self.gate.held(PIPE_DESCRIPTORS) > self.gate.descriptors:
            self._unsplice()
            return
        fds: list[int] = []
        try:
            for transport in (self.client, upstream):
                fds.append(os.dup(transport.get_extra_info("socket").fileno()))
            spliced = SplicedRelay(fds[0], fds[1], self.close)
        except OSError as exc:
            logger.debug("relaying %s through asyncio: %s", self.key, exc)
            for fd in fds:
                os.close(fd)
            self._unsplice()
            return
        self.spliced, self.spliceable = spliced, False
        self.gate.spliced += 1
        self.client.abort()  # their descriptors closed; the duplicates keep the connections
        upstream.abort()

    def _unsplice(self) -> None:
        self.spliceable = False
        for transport in (self.client, self.upstream):
            if transport is not None:
                transport.set_write_buffer_limits()

    def holding(self) -> int:
        """Bytes read from one side and not yet written to the other."""
        if self.spliced is not None:
            return self.spliced.held()
        sides = (self.client, self.upstream)
        return sum(t.get_write_buffer_size() for t in sides if t is not None)

    def close(self, flush: bool = True) -> None:
        if self.closed:
            return
        self.closed = True
        self.deadline.cancel()
        self.connecting.cancel()  # nothing once connected
        self.gate.relays -= 1
        self.gate.live.discard(self)
        if not self.ready:
            self.peer.pending -= 1
            self.gate.pending -= 1
        if self.spliced is not None:
            self.gate.spliced -= 1
            self.spliced.close(flush and self.ready, self.gate.handshake_s)
            return
        loop = asyncio.get_running_loop()
        for transport in (self.client, self.upstream):
            if transport is None:
                continue
            if flush and self.ready and transport.get_write_buffer_size():
                transport.close()  # written first, then closed
                loop.call_later(self.gate.handshake_s, transport.abort)
            else:
                transport.abort()


READ_BYTES = 1 << 16
"""What one read of a relay takes at most, into a buffer it keeps."""


class _Side(asyncio.BufferedProtocol):
    """One connection of a relay. Its data goes to the other connection (``other``); the other
    is not read while this one's send buffer is full, so a side that does not read holds at
    most a buffer's worth of the other's data. Reads land in a buffer the side keeps (a new
    ``bytes`` for every read, and its copy into the other's send buffer, cost ~1 ms of CPU a
    MiB relayed); one the other transport still holds part of (it could not send it all at
    once, and may keep a view of it) is left to it and replaced."""

    relay: _Relay
    buffer: memoryview

    def other(self) -> asyncio.Transport | None:
        raise NotImplementedError

    def data_received(self, data: memoryview) -> None:
        raise NotImplementedError

    def get_buffer(self, sizehint: int) -> memoryview:
        if not hasattr(self, "buffer"):
            self.buffer = memoryview(bytearray(READ_BYTES))
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self.buffer[:nbytes])
        other = self.other()
        if other is not None and other.get_write_buffer_size():
            self.buffer = memoryview(bytearray(READ_BYTES))

    def pause_writing(self) -> None:
        if (other := self.other()) is not None:
            other.pause_reading()

    def resume_writing(self) -> None:
        if (other := self.other()) is not None and not self.relay.closed:
            other.resume_reading()
            self.relay.splice()

    def eof_received(self) -> bool | None:
        self.relay.close()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        # (a connection the gate turned away has no relay; a spliced one's goes on without it)
        if hasattr(self, "relay") and self.relay.spliced is None:
            self.relay.close()


class _FromClient(_Side):
    """The client's connection: its greeting relayed as it comes, its first command held until
    it is whole (a HELLO is charged first: with no token left it is never sent), then
    everything relayed untouched."""

    def __init__(self, gate: Gate) -> None:
        self.gate = gate
        self.greeting_left = GREETING_BYTES
        self.held = bytearray()
        self.piping = False

    def other(self) -> asyncio.Transport | None:
        return self.relay.upstream

    def connection_made(self, transport: Any) -> None:
        relay = self.gate.admit(transport)
        if relay is not None:
            self.relay = relay

    def data_received(self, data: memoryview) -> None:
        upstream = self.relay.upstream
        assert upstream is not None, "the client is read once the ROUTER's end is open"
        if self.piping:
            upstream.write(data)
            return
        if self.greeting_left:
            greeting = data[: self.greeting_left]
            upstream.write(greeting)
            self.greeting_left -= len(greeting)
            data = data[len(greeting) :]
        self.held += data
        first = _first_command(self.held)
        if first is None:
            return  # not whole yet
        _, body = first
        if body is not None and body.startswith(b"\x05HELLO") and not self.relay.spend():
            self.relay.close(flush=False)  # no token left: the guess is never made
            return
        self.piping = True
        upstream.write(bytes(self.held))
        self.held = bytearray()


class _FromServer(_Side):
    """The ROUTER's connection: relayed as it comes, watched up to the server's READY (the
    handshake went through), or a frame that is no handshake command (then the connection never
    counts as through, and the deadline closes it)."""

    def __init__(self, relay: _Relay) -> None:
        self.relay = relay
        self.greeting_left = GREETING_BYTES
        self.seen = bytearray()
        self.watching = True

    def other(self) -> asyncio.Transport:
        return self.relay.client

    def connection_made(self, transport: Any) -> None:
        self.relay.opened(transport)

    def data_received(self, data: memoryview) -> None:
        self.relay.client.write(data)
        if not self.watching:
            return
        if self.greeting_left:
            skipped = min(self.greeting_left, len(data))
            self.greeting_left -= skipped
            data = data[skipped:]
        self.seen += data
        while (command := _first_command(self.seen)) is not None:
            length, body = command
            if body is None or body.startswith(b"\x05READY"):
                self.watching = False  # past the handshake (through, or not one: never)
                self.seen = bytearray()
                if body is not None:
                    self.relay.through()
                return
            del self.seen[:length]


def _first_command(buffer: bytearray) -> tuple[int, bytes | None] | None:
    """The ZMTP frame at the start of ``buffer``, once there is enough of it to tell: a small
    command's length and body; any other frame (a message, or a command too large to be a
    handshake's) its header's length and ``None``. ``None`` while more bytes are needed."""
    if len(buffer) < 2:
        return None
    size_len = 8 if buffer[0] & LONG else 1
    if len(buffer) < 1 + size_len:
        return None
    size = int.from_bytes(buffer[1 : 1 + size_len], "big")
    if not buffer[0] & COMMAND or size > MAX_HANDSHAKE_COMMAND:
        return 1 + size_len, None
    if len(buffer) < 1 + size_len + size:
        return None
    return 1 + size_len + size, bytes(buffer[1 + size_len : 1 + size_len + size])
