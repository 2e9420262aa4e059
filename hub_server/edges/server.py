"""Serving the hub with uvicorn: proxy trust, and a deadline for a request's headers.

The header deadline is the SDK's (``verifiers.asgi.deadlines``: every request gets
``read_timeout`` seconds to finish its headers); the ASGI guard (``hub_server.edges.guard``) bounds
the body the same way. ``X-Forwarded-Proto``/``-For`` are believed only from ``trusted_proxies``.
"""

from __future__ import annotations

from typing import Any

from verifiers.asgi.deadlines import header_timeout_protocol


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
