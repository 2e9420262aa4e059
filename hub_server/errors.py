"""The hub's one error type and the handlers that give every failure a stable ``code``.

Routes raise ``HubError(status, code, message)``; the framework's own failures (an unknown route,
a method a route does not take, a malformed request) are answered in the same shape, so clients
branch on ``error.code`` and never on prose.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

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


def error_body(code: str, message: str) -> dict[str, Any]:
    """``error.code`` for clients to branch on; ``detail``, the same message, is where
    FastAPI-style clients (Prime's official ``prime`` CLI among them) look for it."""
    return {"error": {"code": code, "message": message}, "detail": message}


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HubError)
    async def hub_error(_: Request, exc: HubError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, exc.message), exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return JSONResponse(error_body("invalid_request", f"{where}: {first['msg']}"), 422)

    @app.exception_handler(StarletteHTTPException)
    async def framework(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = FRAMEWORK_CODES.get(exc.status_code, f"http_{exc.status_code}")
        message = {
            404: f"no route {request.url.path}; the API is under /api/v1 (see /openapi.json)",
            405: f"{request.method} is not allowed on {request.url.path}",
        }.get(exc.status_code, str(exc.detail))
        return JSONResponse(error_body(code, message), exc.status_code, headers=exc.headers)
