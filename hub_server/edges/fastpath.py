"""What the ASGI fast paths share (``IndexFastPath``, ``SearchFastPath``, ``PageFastPath``): the
hub's most frequent requests are answered without the framework's routing and validation, which
cost more than the answer itself."""

from __future__ import annotations

from typing import Any


def request_headers(scope: dict[str, Any]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


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
