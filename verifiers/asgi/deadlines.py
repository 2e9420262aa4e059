"""Deadlines for a request's headers and body, for every server of this project.

uvicorn times out idle keep-alive connections but not a client that sends half its headers and
then trickles (or nothing at all): each such connection would be held open for good, and enough
of them make a server unreachable. ``header_timeout_protocol`` gives every request
``read_timeout`` seconds from its first byte (or from the connection opening) to finish its
headers; ``read_body`` (``verifiers.asgi.json_api``) bounds a body the same way, and the hub's
guard (whose uploads are large) by ``body_wait``: a total deadline that grows with the bytes
received at ``MIN_BODY_RATE``. So neither a stalled nor a trickled body holds a budget or a
slot for as long as its sender likes.

The connection itself is bounded the same way where no route reads: a request answered before its
body was all received (a 408, a refusal, a route that reads none) has ``read_timeout`` seconds
for the rest to arrive (it is discarded), and a response the client stops reading (the write
buffer full) has ``read_timeout`` seconds to drain; past either the connection is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

READ_TIMEOUT_S = 30.0
"""The default: seconds a client may take to send its headers, and its body."""


def _cancel(timer: asyncio.TimerHandle | None) -> asyncio.TimerHandle | None:
    """Cancel ``timer`` if armed; None, to store in its place."""
    if timer is not None:
        timer.cancel()
    return None


def header_timeout_protocol(read_timeout: float) -> type[HttpToolsProtocol]:
    class HeaderDeadline(HttpToolsProtocol):
        # A connection keeps one header timer, armed at most once per read_timeout: a request
        # only notes when its headers began (``_since``) and that they ended. A timer set and
        # cancelled for every request cost vf-serve ~25 us of CPU a request (~15% of a small one).
        _since: float | None = None  # when the headers now awaited began
        _deadline: asyncio.TimerHandle | None = None
        _draining: asyncio.TimerHandle | None = None  # a body still coming after the response
        _stalled: asyncio.TimerHandle | None = None  # a response the client does not read

        def _arm(self) -> None:
            if self._since is None:
                self._since = self.loop.time()
            if self._deadline is None:
                self._deadline = self.loop.call_at(self._since + read_timeout, self._check)

        def _disarm(self) -> None:
            self._since = None  # the timer, when it fires, finds nothing due

        def _check(self) -> None:
            self._deadline = None
            if self._since is None:
                return
            due = self._since + read_timeout
            if self.loop.time() >= due:
                self._expire()
            else:  # headers that began after the timer was set: theirs is later
                self._deadline = self.loop.call_at(due, self._check)

        def _expire(self) -> None:
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._draining = _cancel(self._draining)
            super().on_message_complete()

        def on_response_complete(self) -> None:
            cycle = self.cycle
            if cycle is not None and cycle.more_body and self._draining is None:
                self._draining = self.loop.call_later(read_timeout, self._expire)
            super().on_response_complete()

        def pause_writing(self) -> None:
            if self._stalled is None:  # abort: close() would wait for the buffer to drain
                self._stalled = self.loop.call_later(read_timeout, self.transport.abort)
            super().pause_writing()

        def resume_writing(self) -> None:
            self._stalled = _cancel(self._stalled)
            super().resume_writing()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            self._deadline = _cancel(self._deadline)
            self._draining = _cancel(self._draining)
            self._stalled = _cancel(self._stalled)
            super().connection_lost(exc)

    return HeaderDeadline


MIN_BODY_RATE = 16 * 1024
"""Bytes a second a body must average, after ``read_timeout`` seconds of grace: a body sent a
byte at a time (never silent long enough for an idle timeout) is cut off as a stalled one is."""


def body_wait(started: float, received: int, now: float, read_timeout: float) -> float:
    """Seconds to wait for a body's next part: ``read_timeout`` at most, and no later than its
    total deadline, ``read_timeout`` plus ``received / MIN_BODY_RATE`` from ``started`` (so a
    large upload at a real link's speed always makes it, a trickle never lasts)."""
    deadline = started + read_timeout + received / MIN_BODY_RATE
    return max(0.0, min(read_timeout, deadline - now))
