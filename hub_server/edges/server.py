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

    serving_collection()
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


SERVE_YOUNG_THRESHOLD = 10_000
"""Net allocations between young collections while serving (CPython's default: 700)."""


def serving_collection() -> None:
    """The collector of a serving hub process, set once the app is built and before the first
    request: everything that exists then (the imports, the app, the hub's state) is frozen out
    of the collector (``gc.freeze``), and young collections come every
    ``SERVE_YOUNG_THRESHOLD`` allocations, so a request's short-lived objects are freed by
    reference counting before one runs. A full collection walks every object the process
    holds; at 10,000 environments one took 47-53 ms of the loop's CPU while serving pages and
    searches (each 0.1-0.3 ms), and every request in flight waited it out: a p99 made of
    pauses. With the startup heap frozen, no full collection ran while serving. The frozen
    objects live as long as the process, as they would anyway. A process with the collector
    disabled is left alone."""
    import gc

    if gc.isenabled():
        gc.freeze()
        found = gc.get_threshold()
        gc.set_threshold(max(found[0], SERVE_YOUNG_THRESHOLD), *found[1:])
