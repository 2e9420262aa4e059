"""What the ASGI fast paths share (``IndexFastPath``, ``SearchFastPath``, ``PageFastPath``): the
hub's most frequent requests are answered without the framework's routing and validation, which
cost more than the answer itself."""

from __future__ import annotations

import json
from typing import Any

from hub_server.errors import HubError, error_body


def request_headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def some_headers(scope: dict[str, Any], names: frozenset[bytes]) -> dict[str, str]:
    """``request_headers`` but only ``names`` (lower case): what a fast path reads, without
    decoding every header a client sends. A repeated header keeps its last value, as there."""
    return {
        k.decode("latin-1").lower(): v.decode("latin-1")
        for k, v in scope["headers"]
        if k.lower() in names
    }


async def respond(send: Any, status: int, media: str, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", media.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def error_json(exc: HubError) -> bytes:
    """A refusal's body, byte for byte as the routes' handlers send it (``JSONResponse``)."""
    body = error_body(exc.code, exc.message)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
