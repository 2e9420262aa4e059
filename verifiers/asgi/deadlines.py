"""Deadlines for a request's headers and body, for every server of this project.

uvicorn times out idle keep-alive connections but not a client that sends half its headers and
then trickles (or nothing at all): each such connection would be held open for good, and enough
of them make a server unreachable. ``header_timeout_protocol`` gives every request
``read_timeout`` seconds from its first byte (or from the connection opening) to finish its
headers; ``read_body`` (``verifiers.asgi.json_api``) and the hub's guard bound the body the
same way, so a stalled body cannot hold a budget or a slot for as long as its sender likes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

READ_TIMEOUT_S = 30.0
"""The default: seconds a client may take to send its headers, and its body."""


def header_timeout_protocol(read_timeout: float) -> type[HttpToolsProtocol]:
    class HeaderDeadline(HttpToolsProtocol):
        _deadline: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            if self._deadline is None:
                self._deadline = self.loop.call_later(read_timeout, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
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

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderDeadline
