"""OpenAI-style JSON responses and errors, shared by the server's route modules."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response


class APIError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "invalid_request_error",
        param: str | None = None,
    ):
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param


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
