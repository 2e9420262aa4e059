"""OpenAI-style JSON responses and errors, shared by the server's route modules."""

from __future__ import annotations

import asyncio
import hmac
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from verifiers.errors import VFError


class APIError(VFError):
    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        param: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param

    def __reduce__(self) -> tuple[type[APIError], tuple[int, str, str, str | None]]:
        """Pickled whole: vf-serve's large-prompt process raises these to the server."""
        return type(self), (self.status, self.message, self.kind, self.param)


def _json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def _error(exc: APIError) -> Response:
    return _json(
        {
            "error": {
                "message": exc.message,
                "type": exc.kind,
                "param": exc.param,
                "code": exc.status,
            }
        },
        exc.status,
    )


MAX_BODY = 32 * 1024 * 1024


async def read_body(
    request: Request, limit: int = MAX_BODY, timeout: float | None = None
) -> bytes:
    """The request body, refused with a 413 past ``limit`` bytes (counted as it streams) and
    with a 408 when it has not all arrived within ``timeout`` seconds (default: the app's
    ``state.read_timeout``, else none): a stalled body must not hold what it was admitted to."""
    length = request.headers.get("content-length", "")
    if length.isascii() and length.isdigit() and int(length) > limit:
        raise APIError(413, f"request bodies are limited to {limit} bytes")
    if timeout is None:
        timeout = getattr(request.app.state, "read_timeout", None)
    chunks, size = [], 0
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise APIError(413, f"request bodies are limited to {limit} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise APIError(408, f"the request body did not arrive within {timeout:g} s") from None
    return b"".join(chunks)


class APIKeyCheck:
    """Every route but ``/health`` needs ``Authorization: Bearer KEY`` (vf-serve's
    ``--api-key``, the toolset servers the SDK launches): checked before the route reads a body."""

    def __init__(self, app: Any, api_key: str) -> None:
        self.app, self.expected = app, f"Bearer {api_key}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] != "/health":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                response = _error(APIError(401, "invalid API key", kind="authentication_error"))
                return await response(scope, receive, send)
        await self.app(scope, receive, send)
