"""ASGI guard in front of the hub: authenticate before reading, cap bodies, cut off stalled clients.

Every request that changes state needs a valid bearer token (``hub_server.services.auth`` decides which
credential a route takes); the guard checks it from the headers before a byte of the body is read, so an anonymous 300 MiB upload is refused at once instead of being
spooled first. The exceptions carry their own credential or none, each under a small cap: the
web forms (a session or a token to exchange, and a CSRF token), a staged push's upload URL, and
``prime login``'s request for a challenge. Bodies are capped by route (uploads are large, JSON is small), whether or not the
client sends a Content-Length, and a client that stops sending mid-body for ``read_timeout``
seconds, or sends it slower than ``MIN_BODY_RATE`` on average after that grace
(``verifiers.asgi.deadlines.body_wait``), is answered 408 and its connection closed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from hub_protocol.wire import ATTACHMENT_KINDS, ErrorResponse
from verifiers.asgi.deadlines import MIN_BODY_RATE, body_wait

UPLOAD_SUFFIXES = ("/versions", *(f"/{kind}" for kind in ATTACHMENT_KINDS))
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
# the web pages' forms: they carry their own credential (a token to exchange, or the session)
# and a CSRF token, so they pass without an Authorization header, with small bodies only
FORM_ROUTES = {"/login": 16 * 1024, "/logout": 4 * 1024, "/dashboard/tokens/challenge": 4 * 1024}
# `prime login` (Prime's official CLI) asks for a login before it has any credential: its RSA
# public key in a small JSON body (hub_server.services.login bounds how many wait at once)
ANONYMOUS_ROUTES = {"/api/v1/auth_challenge/generate": 16 * 1024}
# an upload URL of a staged push (Prime's official CLI): the URL is the credential (a
# single-use token checked by the route), so this one route, PUT only, passes without a token
UPLOAD_URL = re.compile(r"/api/v1/environmentshub/uploads/[A-Za-z0-9_-]{40,64}")
# the staged push's declares are JSON, though one ends in /versions
JSON_PREFIX = "/api/v1/environmentshub/"
# where the guard leaves the principal it authenticated, for the route (``routers.deps``): one
# token lookup per request, not one here and another in the route
PRINCIPAL = "hub.principal"
# a batch of eval samples from Prime's official CLI: JSON of up to 25 MB, the one JSON body
# allowed past the JSON cap (what one eval holds in all is bounded by its route)
EVAL_SAMPLES = re.compile(r"/api/v1/evaluations/[A-Za-z0-9_-]{1,64}/samples")


class BodyRefused(Exception):
    """Raised into the app when a body is too large or stalls; the guard sends the answer."""


class RequestGuard:
    def __init__(
        self,
        app: Any,
        authenticate: Callable[[dict[str, Any], dict[str, str]], Any],
        upload_limit: int,
        json_limit: int = 1024 * 1024,
        read_timeout: float = 30.0,
        upload_url_limit: int | None = None,
        samples_limit: int | None = None,
    ) -> None:
        self.app = app
        self.authenticate = authenticate
        self.upload_limit = upload_limit
        self.json_limit = json_limit
        self.read_timeout = read_timeout
        self.upload_url_limit = upload_url_limit or upload_limit
        self.samples_limit = samples_limit or json_limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        form_limit = FORM_ROUTES.get(scope["path"]) or ANONYMOUS_ROUTES.get(scope["path"])
        if scope["method"] == "PUT" and UPLOAD_URL.fullmatch(scope["path"]):
            form_limit = self.upload_url_limit
        if form_limit is None:
            try:
                user = self.authenticate(scope, headers)
            except Exception as exc:  # HubError: invalid or expired token
                status, code = getattr(exc, "status", 401), getattr(exc, "code", "invalid_token")
                return await _error(send, status, code, getattr(exc, "message", str(exc)))
            if user is None:
                return await _error(
                    send, 401, "auth_required", "this needs an API token: run `prime login`"
                )
            scope.setdefault("state", {})[PRINCIPAL] = user
        uploads = scope["path"].rstrip("/").endswith(UPLOAD_SUFFIXES) and not scope[
            "path"
        ].startswith(JSON_PREFIX)
        limit = form_limit or (self.upload_limit if uploads else self.json_limit)
        if scope["method"] == "POST" and EVAL_SAMPLES.fullmatch(scope["path"]):
            limit = self.samples_limit
        too_large = (413, "body_too_large", f"request bodies here are limited to {limit} bytes")
        length = headers.get("content-length", "")
        if length.isascii() and length.isdigit() and int(length) > limit:
            return await _error(send, *too_large)

        received = 0
        refusal: tuple[int, str, str] | None = None
        answered = False
        loop = asyncio.get_running_loop()
        started = loop.time()

        async def guarded_receive() -> dict[str, Any]:
            nonlocal received, refusal
            wait = body_wait(started, received, loop.time(), self.read_timeout)
            try:
                message = await asyncio.wait_for(receive(), timeout=wait)
            except TimeoutError:
                refusal = (
                    408,
                    "request_timeout",
                    f"the body stalled for {self.read_timeout:g} s or came slower than "
                    f"{MIN_BODY_RATE} bytes a second",
                )
                raise BodyRefused from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refusal = too_large
                    raise BodyRefused
            return message

        async def guarded_send(message: dict[str, Any]) -> None:
            # the framework answers a failed body read with its own 400: say what really happened
            nonlocal answered
            if refusal is not None:
                if not answered:
                    answered = True
                    await _error(send, *refusal)
                return
            await send(message)

        try:
            await self.app(scope, guarded_receive, guarded_send)
        except BodyRefused:
            if not answered:
                await _error(send, *(refusal or too_large))


async def _error(send: Any, status: int, code: str, message: str) -> None:
    body = ErrorResponse.of(code, message).model_dump_json().encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status in (408, 413):  # the rest of the body is never read: the connection ends here
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
