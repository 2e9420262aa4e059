"""The gate's relay once a handshake went through: what a read does not take moves in the kernel.

Through asyncio's transports (``verifiers.workers.gate``'s protocols) every read cost the server
a callback chain each way (transport, protocol, the other transport's ``write``) and, for large
frames, two copies through Python (out of one socket, into the other): ~0.5 ms of its CPU a MiB
relayed, and a health ping cost it ~1.3x what it does without the gate. Past the handshake the
gate only relays, so each connection pair is taken from asyncio (its descriptors duplicated, the
transports dropped) and relayed from a bare ``add_reader`` callback per direction: one ``read``
of at most ``READ_BYTES`` and one ``write`` carry a small message (a ``splice`` costs more
there: ~3x the kernel time a health ping); when the read came back full, the rest of what the
socket has goes through a pipe with ``os.splice`` (page references, not copies), 8 MiB frames
then costing the server less CPU through the gate than libzmq reading TCP itself.

The bounds stay those of the protocols: a direction whose destination does not take all it
has read keeps the rest in its pipe and stops reading its source until the pipe is drained (a
side that does not read holds at most a pipe's worth of the other's data, and nothing it has not
taken is overwritten); when either side ends or fails, what each pipe holds is written within
``grace`` seconds, then every descriptor is closed. Where ``os.splice`` is missing (not Linux)
or a pipe cannot be had (out of descriptors, the gate's or the process's), the gate keeps the
connection on its protocols; a socket ``splice`` refuses is relayed by reads alone.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
from collections.abc import Callable

PIPE_BYTES = 1 << 20
"""A direction's pipe (``F_SETPIPE_SZ``; Linux's default limit for an unprivileged user): what
one ``splice`` moves at most, and what a side that does not read can leave held."""
READ_BYTES = 1 << 14
"""What a read takes first (a copy): all of a small message, for which a ``splice`` costs more."""
PIPE_DESCRIPTORS = 4
"""Descriptors a spliced relay holds beyond its two sockets: a pipe, two ends, each way."""
AVAILABLE = hasattr(os, "splice") and hasattr(fcntl, "F_SETPIPE_SZ")
_FLAGS = getattr(os, "SPLICE_F_MOVE", 0) | getattr(os, "SPLICE_F_NONBLOCK", 0)


class _Way:
    """One direction: ``src`` into the pipe, the pipe into ``dst``; ``held`` bytes in between."""

    __slots__ = ("dst", "held", "into", "out", "relay", "splices", "src")

    def __init__(self, relay: SplicedRelay, src: int, dst: int, pipe: tuple[int, int]) -> None:
        self.relay, self.src, self.dst = relay, src, dst
        self.out, self.into = pipe
        self.held = 0
        self.splices = True

    def readable(self) -> None:
        try:
            data = os.read(self.src, READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # end of stream, or the connection failed
            self.relay.end()
            return
        try:
            sent = os.write(self.dst, data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.relay.end()
            return
        if sent < len(data):  # the pipe is empty while src is read: it takes the rest
            self.held = os.write(self.into, data[sent:])
            self.drain()
        elif len(data) == READ_BYTES and self.splices:
            self.splice()

    def splice(self) -> None:
        """The rest of what ``src`` has, through the pipe."""
        try:
            moved = os.splice(self.src, self.into, PIPE_BYTES, flags=_FLAGS)
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOSYS):  # not for this socket: reads, then
                self.splices = False
            else:
                self.relay.end()
            return
        if not moved:  # end of stream
            self.relay.end()
            return
        self.held += moved
        self.drain()

    def drain(self) -> None:
        """The pipe into ``dst`` while it takes it; when it does not take it all, ``src`` is not
        read until it has (``writable``)."""
        while self.held:
            try:
                moved = os.splice(self.out, self.dst, self.held, flags=_FLAGS)
            except BlockingIOError:
                break
            except OSError:
                self.held = 0  # nowhere to write it
                self.relay.end()
                return
            self.held = self.held - moved if moved else 0
        loop = self.relay.loop
        if self.held:
            loop.remove_reader(self.src)
            loop.add_writer(self.dst, self.writable)

    def writable(self) -> None:
        self.drain()
        if self.held:
            return
        self.relay.loop.remove_writer(self.dst)
        if self.relay.ending:
            self.relay.flushed()
        else:
            self.relay.loop.add_reader(self.src, self.readable)


class SplicedRelay:
    """A client's socket and the server's, relayed both ways in the kernel from now on. It owns
    the two descriptors given (and its pipes): all are closed when it ends. ``on_end`` is called
    once, when either side ends or fails."""

    def __init__(self, client: int, upstream: int, on_end: Callable[[], None]) -> None:
        pipes: list[tuple[int, int]] = []
        try:
            for _ in range(2):
                pipes.append(os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC))
                try:
                    fcntl.fcntl(pipes[-1][1], fcntl.F_SETPIPE_SZ, PIPE_BYTES)
                except OSError:  # above this user's pipe limits: a smaller pipe does too
                    pass
        except OSError:
            for pipe in pipes:
                os.close(pipe[0])
                os.close(pipe[1])
            raise
        self.loop = asyncio.get_running_loop()
        self.sockets = (client, upstream)
        self.ways = (_Way(self, client, upstream, pipes[0]), _Way(self, upstream, client, pipes[1]))
        self.on_end = on_end
        self.ending = self.finished = False
        self.timer: asyncio.TimerHandle | None = None
        for way in self.ways:
            self.loop.add_reader(way.src, way.readable)

    def held(self) -> int:
        """Bytes read from one side and not yet taken by the other."""
        return sum(way.held for way in self.ways)

    def end(self) -> None:
        if not self.ending:
            self.on_end()

    def close(self, flush: bool, grace: float) -> None:
        """Stop reading; with ``flush``, what the pipes hold is written first (``grace`` seconds
        at most), then every descriptor is closed."""
        if self.ending:
            return
        self.ending = True
        for way in self.ways:
            self.loop.remove_reader(way.src)
        if flush and self.held():
            self.timer = self.loop.call_later(grace, self.finish)
        else:
            self.finish()

    def flushed(self) -> None:
        if not self.held():
            self.finish()

    def finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        if self.timer is not None:
            self.timer.cancel()
        for way in self.ways:
            self.loop.remove_writer(way.dst)
            os.close(way.out)
            os.close(way.into)
        for fd in self.sockets:
            os.close(fd)
