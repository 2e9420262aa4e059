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
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from verifiers.asgi.peers import peer_of

logger = logging.getLogger("verifiers.workers.gate")
GREETING_BYTES = 64
"""A ZMTP 3 greeting (signature, version, mechanism, as-server, filler)."""
MAX_HANDSHAKE_COMMAND = 1024
"""A handshake command is a few hundred bytes (HELLO 200); a larger first frame is not one."""
COMMAND, LONG = 0x04, 0x02
"""ZMTP frame flags: a command, and a size of 8 bytes rather than 1."""
RELAY_CHUNK = 1 << 18


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
        # each relay holds 3 descriptors: the peer's, the gate's to the ROUTER, libzmq's end;
        # at most half of them mid-handshake, so callers through keep room to reconnect
        self.relays, self.max_relays = 0, descriptors_to_spare(3)
        self.pending, self.warned = 0, -60.0

    async def start(self, listener: Any) -> asyncio.Server:
        from verifiers.processes.open_files import ACCEPT_BURST

        return await asyncio.start_server(
            self._connection, sock=listener, limit=RELAY_CHUNK, backlog=ACCEPT_BURST
        )

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        key = peer_key(writer.get_extra_info("peername"), writer.get_extra_info("sockname"))
        peer = self.budgets.admits(key, time.monotonic())
        full = self.relays >= self.max_relays or self.pending >= self.max_relays // 2
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
            writer.transport.abort()
            return
        peer.pending += 1
        self.relays += 1
        self.pending += 1
        ready, charged = asyncio.Event(), asyncio.Event()
        upstream: asyncio.StreamWriter | None = None
        try:
            up_reader, upstream = await asyncio.open_unix_connection(
                self.upstream, limit=RELAY_CHUNK
            )
            pumps = [
                asyncio.ensure_future(self._from_client(key, peer, reader, upstream, charged)),
                asyncio.ensure_future(self._from_server(peer, up_reader, writer, ready, charged)),
            ]
            try:
                waiting = asyncio.ensure_future(ready.wait())
                done, _ = await asyncio.wait(
                    [*pumps, waiting], timeout=self.handshake_s, return_when="FIRST_COMPLETED"
                )
                waiting.cancel()
                if ready.is_set() and not any(p in done for p in pumps):
                    await asyncio.wait(pumps, return_when="FIRST_COMPLETED")
            finally:
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
        except OSError as exc:  # out of descriptors, or the server is going away
            logger.debug("could not relay a connection from %s: %s", key, exc)
        finally:
            self.relays -= 1
            if not ready.is_set():
                peer.pending -= 1
                self.pending -= 1
            writer.transport.abort()
            if upstream is not None:
                upstream.transport.abort()

    async def _from_client(
        self,
        key: str,
        peer: Peer,
        reader: asyncio.StreamReader,
        upstream: asyncio.StreamWriter,
        charged: asyncio.Event,
    ) -> None:
        """The greeting, then the first command: a HELLO is a guess, charged before it is sent."""
        await _relay_greeting(reader, upstream)
        head = await reader.readexactly(2)
        size_bytes = head[1:]
        if head[0] & LONG:
            size_bytes += await reader.readexactly(7)
        size = int.from_bytes(size_bytes, "big")
        first = head[:1] + size_bytes
        if head[0] & COMMAND and size <= MAX_HANDSHAKE_COMMAND:
            first += await reader.readexactly(size)
            if first[len(size_bytes) + 1 :].startswith(b"\x05HELLO"):
                if not self.budgets.spend(key, peer, time.monotonic()):
                    return  # no token left: the guess is never made
                charged.set()
        upstream.write(first)
        await _relay(reader, upstream)

    async def _from_server(
        self,
        peer: Peer,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        ready: asyncio.Event,
        charged: asyncio.Event,
    ) -> None:
        """Relayed as it comes, read until the server's READY: the handshake went through."""
        await _relay_greeting(reader, writer)
        while True:
            head = await reader.readexactly(2)
            size_bytes = head[1:] + (await reader.readexactly(7) if head[0] & LONG else b"")
            size = int.from_bytes(size_bytes, "big")
            writer.write(head[:1] + size_bytes)
            if not head[0] & COMMAND or size > MAX_HANDSHAKE_COMMAND:
                break  # not a handshake: relay it, never counting the connection as through
            body = await reader.readexactly(size)
            writer.write(body)
            if body.startswith(b"\x05READY"):
                peer.pending -= 1
                self.pending -= 1
                ready.set()
                if charged.is_set():
                    self.budgets.succeeded(peer)
                break
        await _relay(reader, writer)


class GateThread:
    """A :class:`Gate` on its own thread and event loop. Relaying is mostly socket calls, which
    release the GIL, so it runs beside the server's loop instead of taking turns with it: on the
    server's loop, pipelined health requests went 3-5x slower than without a gate; here they go
    as fast (benchmarks in SECURITY.md)."""

    def __init__(self, gate: Gate) -> None:
        self.gate, self.loop = gate, asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="vf-gate", daemon=True)
        self.server: asyncio.Server | None = None

    async def start(self, listener: Any) -> None:
        self.thread.start()
        started = asyncio.run_coroutine_threadsafe(self.gate.start(listener), self.loop)
        self.server = await asyncio.wrap_future(started)

    async def stop(self) -> None:
        """Stop listening, end every relay, and the thread with them."""
        if self.thread.is_alive():
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._close(), self.loop))
            self.loop.call_soon_threadsafe(self.loop.stop)
            await asyncio.to_thread(self.thread.join, 10)
        if not self.thread.is_alive():
            self.loop.close()

    async def _close(self) -> None:
        if self.server is not None:
            self.server.close()
        relays = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in relays:
            task.cancel()
        await asyncio.gather(*relays, return_exceptions=True)


async def _relay_greeting(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A greeting is sent in parts, each side waiting for the other's first bytes: relayed as
    it comes, up to its end."""
    left = GREETING_BYTES
    while left:
        data = await reader.read(left)
        if not data:
            raise asyncio.IncompleteReadError(b"", left)
        writer.write(data)
        left -= len(data)


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(RELAY_CHUNK):
        writer.write(data)
        await writer.drain()
