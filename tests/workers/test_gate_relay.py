"""vf-env-server's gate relays through asyncio protocols (transport to transport, no streams)
on the server's event loop, and past the handshake in the kernel (``os.splice``), or still
through the protocols when it has no descriptors to spare for the pipes: each test runs both
ways. A real CurveZMQ ROUTER behind a real gate on loopback, a DEALER through it. What the relay
must keep: messages whole both ways, what a slow reader leaves, the handshake deadline, both
sides closed when one ends (what was held written first), and the bookkeeping of relays and
half-handshakes back to zero."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import zmq
import zmq.asyncio

from verifiers.workers import spliced
from verifiers.workers.auth import listening_socket, secure_client, secure_server
from verifiers.workers.gate import GREETING_BYTES, Gate, PeerBudgets

SECRET = "a-secret-for-the-gate-relay-tests-0123456789"
HANDSHAKE_S = 1.0


@dataclass
class Gated:
    """A ROUTER behind a gate: the gate, its TCP port and the ROUTER socket."""

    gate: Gate
    port: int
    router: Any
    context: Any
    how: str

    def dealer(self, receive_queue: int = 1000) -> Any:
        """A DEALER with the secret; ``receive_queue`` messages at most read ahead for it."""
        dealer = self.context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.setsockopt(zmq.RCVHWM, receive_queue)
        secure_client(dealer, SECRET)
        dealer.connect(f"tcp://127.0.0.1:{self.port}")
        return dealer


RELAYS = ["spliced", "protocols"]


def relay_by(gate: Gate, how: str) -> None:
    """``gate`` relays past the handshake ``how``: in the kernel, or (its descriptors leaving
    room for two relays but not for a relay's pipes) through its protocols."""
    if how == "spliced" and not spliced.AVAILABLE:
        pytest.skip("os.splice is Linux's")
    if how == "protocols":
        gate.descriptors = 6


def through_as(gate: Gate, how: str) -> bool:
    """The relays ``gate`` holds past the handshake are ``how`` (``spliced`` or not)."""
    return all((relay.spliced is not None) == (how == "spliced") for relay in gate.live)


@pytest.fixture(params=RELAYS)
async def gated(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Gated]:
    context = zmq.asyncio.Context()
    router = context.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    auth = secure_server(router, context, SECRET)
    upstream = tmp_path / "router"
    router.bind(f"ipc://{upstream}")
    gate = Gate(str(upstream), PeerBudgets(), handshake_s=HANDSHAKE_S)
    relay_by(gate, request.param)
    listener = listening_socket("127.0.0.1", 0)
    port = listener.getsockname()[1]
    server = await gate.start(listener)
    try:
        yield Gated(gate, port, router, context, request.param)
    finally:
        server.close()
        gate.close_all()
        router.close()
        auth.stop()
        context.term()


async def until(check: Callable[[], bool], within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.02)
    return check()


async def test_large_messages_after_the_handshake_are_relayed_whole_both_ways(gated):
    """8 MiB each way, several in flight: every byte arrives, in order, and the connection
    counts as through (not mid-handshake)."""
    dealer = gated.dealer()
    try:
        payloads = [bytes([i]) * (8 << 20) + b"end %d" % i for i in range(3)]
        for payload in payloads:
            await dealer.send(payload)
        for payload in payloads:
            assert await gated.router.poll(60_000)
            caller, received = await gated.router.recv_multipart()
            assert received == payload
            await gated.router.send_multipart([caller, received[::-1]])
        for payload in payloads:
            assert await dealer.poll(60_000)
            assert await dealer.recv() == payload[::-1]
        assert gated.gate.relays == 1 and gated.gate.pending == 0
        assert through_as(gated.gate, gated.how)
        assert gated.gate.spliced == (gated.how == "spliced")
    finally:
        dealer.close()
    # the caller went: both sides closed, nothing left counted
    assert await until(lambda: gated.gate.relays == 0 and not gated.gate.live)


async def test_what_a_slow_reader_leaves_in_the_relay_is_not_overwritten_by_later_reads(gated):
    """The relay reads into a buffer it keeps. When the other side cannot take a whole read at
    once, the other transport holds that buffer (Python 3.12's keeps a view of it, not a copy)
    and a new one takes the next read: 32 MiB of random bytes sent to a caller that reads
    nothing until the relay is holding some of them arrive exactly as sent."""
    dealer = gated.dealer(receive_queue=1)  # libzmq soon stops reading for it: TCP fills up
    try:
        await dealer.send(b"hello")
        assert await gated.router.poll(30_000)
        caller, _ = await gated.router.recv_multipart()
        payloads = [os.urandom(4 << 20) for _ in range(8)]
        for payload in payloads:
            await gated.router.send_multipart([caller, payload])
        assert await until(lambda: any(r.holding() for r in gated.gate.live))
        assert through_as(gated.gate, gated.how)
        for payload in payloads:
            assert await dealer.poll(60_000)
            assert await dealer.recv() == payload
    finally:
        dealer.close()


async def test_a_connection_that_never_finishes_its_handshake_is_closed_at_its_deadline(gated):
    """A client that sends a greeting and then nothing holds its relay only until the handshake
    deadline: then both of its sides are closed and its peer's half-handshake is given back;
    a caller then gets through."""
    loop = asyncio.get_running_loop()
    raw = socket.socket()
    raw.setblocking(False)  # the gate runs on this loop
    try:
        await loop.sock_connect(raw, ("127.0.0.1", gated.port))
        await loop.sock_sendall(raw, b"\xff" + b"\0" * 8 + b"\x7f")  # a greeting's signature
        # then silence, closed by the gate: libzmq's own handshake limit is 30 s
        async with asyncio.timeout(20):
            while await loop.sock_recv(raw, 4096):  # the server's greeting; then the close
                pass
        assert await until(lambda: gated.gate.pending == 0 and gated.gate.relays == 0)
        assert all(peer.pending == 0 for peer in gated.gate.budgets.peers.values())
    finally:
        raw.close()
    dealer = gated.dealer()
    try:
        await dealer.send(b"hello")
        assert await gated.router.poll(30_000)
        assert (await gated.router.recv_multipart())[1] == b"hello"
    finally:
        dealer.close()


async def test_when_the_server_side_closes_the_client_side_is_closed_too(gated):
    """The ROUTER's end going (the server stopping) closes the caller's connection: the relay
    holds neither side after it."""
    dealer = gated.dealer()
    monitor = dealer.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    try:
        await dealer.send(b"hi")
        assert await gated.router.poll(30_000)
        await gated.router.recv_multipart()
        assert gated.gate.relays == 1
        gated.router.unbind(gated.router.getsockopt(zmq.LAST_ENDPOINT))
        gated.router.close()
        assert await monitor.poll(30_000)  # the caller saw its connection end
        assert await until(lambda: gated.gate.relays == 0 and not gated.gate.live)
        assert gated.gate.spliced == 0
    finally:
        dealer.disable_monitor()
        monitor.close(linger=0)
        dealer.close()


READY = b"\x04\x06\x05READY"
"""A handshake's last command from the server (empty metadata): the gate lets it through."""


@pytest.mark.parametrize("how", RELAYS)
async def test_a_server_that_writes_and_closes_has_every_byte_read_before_the_end(tmp_path, how):
    """A server that writes more than its caller reads yet, then closes its side: the caller
    still gets every byte, in order (what the relay holds, and what the server's socket still
    has, are written before the relay closes the caller's side), then the end of the stream. A
    raw ZMTP-speaking server and client (greetings, a READY), so that the server writes and
    closes when the test says."""
    loop = asyncio.get_running_loop()
    payload = os.urandom(24 << 20)
    served = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readexactly(GREETING_BYTES + 3)  # the client's greeting and a command
        writer.write(bytes(GREETING_BYTES) + READY + payload)
        writer.close()  # once what it holds is written
        served.set()

    upstream = tmp_path / "router"
    server = await asyncio.start_unix_server(serve, str(upstream))
    gate = Gate(str(upstream), PeerBudgets(), handshake_s=30.0)
    relay_by(gate, how)
    listener = listening_socket("127.0.0.1", 0)
    front = await gate.start(listener)
    raw = socket.socket()
    raw.setblocking(False)
    try:
        await loop.sock_connect(raw, listener.getsockname())
        await loop.sock_sendall(raw, bytes(GREETING_BYTES) + b"\x04\x01\x00")
        async with asyncio.timeout(60):
            await served.wait()
            assert await until(lambda: any(relay.holding() for relay in gate.live))
            assert gate.relays == 1 and through_as(gate, how)
            received = bytearray()
            while chunk := await loop.sock_recv(raw, 1 << 20):
                received += chunk
        assert bytes(received) == bytes(GREETING_BYTES) + READY + payload
        assert await until(lambda: gate.relays == 0 and gate.spliced == 0 and not gate.live)
    finally:
        raw.close()
        front.close()
        gate.close_all()
        server.close()
