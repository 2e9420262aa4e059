"""Serving the hub with uvicorn: proxy trust, and a deadline for a request's headers.

uvicorn times out idle keep-alive connections but not a client that sends half its headers and
then trickles (or nothing at all): each such connection would be held open for good. The
protocol here gives every request ``read_timeout`` seconds from its first byte (or from the
connection opening) to finish its headers; the ASGI guard (``hub_server.guard``) bounds the body
the same way. ``X-Forwarded-Proto``/``-For`` are believed only from ``trusted_proxies``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


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


def serve(app: Any, host: str, port: int, read_timeout: float, trusted_proxies: list[str]) -> None:
    import uvicorn

    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        http=header_timeout_protocol(read_timeout),
        proxy_headers=bool(trusted_proxies),
        forwarded_allow_ips=",".join(trusted_proxies) or "",
    )
