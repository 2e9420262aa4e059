"""HSTS on every answer the hub gives over TLS.

Behind a TLS proxy (``--trusted-proxy``, whose ``X-Forwarded-Proto`` uvicorn believes) a browser
that once reached the hub over https is told to use nothing else for two years, so a later
``http://`` link or a network that strips TLS cannot carry its session cookie in the clear. The
header is added here, outermost, so the fast paths that answer without FastAPI carry it too; a
plain-http hub (loopback, tests) sends none, as browsers ignore it there.
"""

from __future__ import annotations

from typing import Any

HSTS = (b"strict-transport-security", b"max-age=63072000; includeSubDomains")


class StrictTransportSecurity:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("scheme") != "https":
            await self.app(scope, receive, send)
            return

        async def send_with_hsts(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0].lower() != HSTS[0]]
                message = {**message, "headers": [*headers, HSTS]}
            await send(message)

        await self.app(scope, receive, send_with_hsts)
