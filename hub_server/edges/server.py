"""Serving the hub with uvicorn: proxy trust, a deadline for a request's headers, and how many
connections a peer (and everyone) may hold.

The header deadline is the SDK's (``verifiers.asgi.deadlines``: every request gets
``read_timeout`` seconds to finish its headers); the ASGI guard (``hub_server.edges.guard``) bounds
the body the same way and by a minimum rate. ``X-Forwarded-Proto``/``-For`` are believed only from
``trusted_proxies``. A connection past ``MAX_PER_PEER`` from one peer (``verifiers.asgi.peers``:
all of 127/8 from one local user is one peer, an IPv6 /64 is one), or past what the process has
descriptors for, is closed as it is accepted, before a byte is read: a flood of slow clients
costs its sender its own connections, and the hub keeps descriptors for everyone else (a trusted
proxy carries many clients, so only the total caps it).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from verifiers.asgi.deadlines import header_timeout_protocol
from verifiers.asgi.peers import peer_of
from verifiers.processes.collector import serve_collection
from verifiers.processes.open_files import ACCEPT_BURST, descriptors_to_spare

MAX_PER_PEER = 128
"""Open connections one peer may hold (a browser opens 6, the CLI's upload pool a few)."""


def capped_protocol(read_timeout: float, trusted_proxies: list[str]) -> type[Any]:
    """The header-deadline protocol, closing connections past the per-peer and total caps."""
    base = header_timeout_protocol(read_timeout)
    # a connection may spool an upload to a temporary file: two descriptors each
    total_cap, proxies = descriptors_to_spare(2), set(trusted_proxies)
    open_by_peer: Counter[str] = Counter()
    opened = 0

    class Capped(base):  # type: ignore[valid-type,misc]
        _peer: str | None = None

        def connection_made(self, transport: Any) -> None:
            nonlocal opened
            peer = transport.get_extra_info("peername")
            local = transport.get_extra_info("sockname")
            host = str(peer[0]) if isinstance(peer, tuple) else ""
            key = peer_of(host, peer[1], tuple(local[:2])) if host else "unknown"
            over_peer = host not in proxies and open_by_peer[key] >= MAX_PER_PEER
            if opened >= total_cap or over_peer:
                transport.abort()
                return
            self._peer = key
            open_by_peer[key] += 1
            opened += 1
            super().connection_made(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            nonlocal opened
            if self._peer is None:
                return
            open_by_peer[self._peer] -= 1
            if not open_by_peer[self._peer]:
                del open_by_peer[self._peer]
            opened -= 1
            self._peer = None
            super().connection_lost(exc)

    return Capped


def serve(app: Any, host: str, port: int, read_timeout: float, trusted_proxies: list[str]) -> None:
    import uvicorn

    serve_collection(freeze=True)  # the app and its state, built: never walked again
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,  # never shown at "warning", yet its line was made for each request
        http=capped_protocol(read_timeout, trusted_proxies),
        proxy_headers=bool(trusted_proxies),
        forwarded_allow_ips=",".join(trusted_proxies) or "",
        backlog=ACCEPT_BURST,
    )
