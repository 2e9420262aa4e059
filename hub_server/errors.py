"""The hub's one error type and the handlers that give every failure a stable ``code``.

Routes raise ``HubError(status, code, message)``; the stores (``db/``) raise a ``StoreRefusal``
(not found, conflicting, not allowed, unstorable), whose status is mapped here; the framework's own failures (an unknown route,
a method a route does not take, a malformed request) are answered in the same shape, so clients
branch on ``error.code`` and never on prose.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from hub_protocol.wire import ErrorResponse

FRAMEWORK_CODES = {
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
    400: "bad_request",
}


class HubError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message

    def __reduce__(self) -> tuple:  # pickles whole, back from an upload worker
        return HubError, (self.status, self.code, self.message)


class StoreRefusal(HubError):
    """What the stores (``db/``) refuse, in their own terms: a kind (the subclass), a stable
    ``code`` and a message, and no HTTP. The status it is answered with is decided here, at the
    edge (``HTTP_STATUS``); it stays a ``HubError``, so whoever handles one (a route, the
    handlers below, ``prime hub create-user``, an upload worker's pickle) handles these."""

    def __init__(self, code: str, message: str) -> None:
        Exception.__init__(self, message)
        self.code, self.message = code, message

    @property
    def status(self) -> int:  # type: ignore[override]  # the edge's mapping, not an attribute
        return HTTP_STATUS[type(self)]

    def __reduce__(self) -> tuple:
        return type(self), (self.code, self.message)


class NotFound(StoreRefusal):
    """No such row, or none the caller may see."""


class Conflicting(StoreRefusal):
    """The row is there already (a name, a version, a file, an attachment), or the change would
    leave the store inconsistent (a team without an owner)."""


class NotAllowed(StoreRefusal):
    """The store holds it, but this caller may not do it (a scope, a quota)."""


class Unstorable(StoreRefusal):
    """A value the stores cannot hold (a NUL, an out-of-range number, too large)."""


class TooMany(StoreRefusal):
    """The store bounds how many of these it keeps at once (pending logins), and is full."""


class Unavailable(StoreRefusal):
    """The database cannot be reached now (restarted, failed over): nothing was written, and
    the same request can be sent again."""


HTTP_STATUS: dict[type[StoreRefusal], int] = {
    Unavailable: 503,
    NotFound: 404,
    Conflicting: 409,
    NotAllowed: 403,
    Unstorable: 400,
    TooMany: 429,
}


def error_body(code: str, message: str) -> dict[str, Any]:
    """The body of an error answer (``hub_protocol.wire.ErrorResponse``, which the client reads)."""
    return ErrorResponse.of(code, message).model_dump()


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HubError)
    async def hub_error(_: Request, exc: HubError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, exc.message), exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        if first.get("type") == "string_unicode":  # a lone surrogate: text no backend stores
            return JSONResponse(error_body("invalid_text", f"{where}: not valid Unicode text"), 400)
        return JSONResponse(error_body("invalid_request", f"{where}: {first['msg']}"), 422)

    @app.exception_handler(RecursionError)
    async def too_deep(_: Request, exc: RecursionError) -> JSONResponse:
        # JSON nested past what the parser recurses into (a body, a form field, a file):
        # refused with a code wherever it arrives, as any unreadable input is
        return JSONResponse(error_body("invalid_json", "the input nests too deeply to read"), 400)

    @app.exception_handler(StarletteHTTPException)
    async def framework(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = FRAMEWORK_CODES.get(exc.status_code, f"http_{exc.status_code}")
        message = {
            404: f"no route {request.url.path}; the API is under /api/v1 (see /openapi.json)",
            405: f"{request.method} is not allowed on {request.url.path}",
        }.get(exc.status_code, str(exc.detail))
        return JSONResponse(error_body(code, message), exc.status_code, headers=exc.headers)
