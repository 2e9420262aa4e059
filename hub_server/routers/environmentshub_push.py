"""The staged push of Prime's official CLI (``prime env push``): resolve, declare, PUT to an
upload URL, finalize (``hub_server.services.staging`` keeps what is staged).

Nothing is visible until the last finalize, which publishes the staged wheel through the native
push's service, in one transaction, after exactly its checks. An upload URL is a capability:
single-use, short-lived, bound to the declared size and sha256, on the hub's own origin; it is
the one request the guard lets through without a token.

A push is seven requests where the native one is three, so in a running hub ``StagedFastPath``
answers them without the framework's routing and dependency solving (most of their CPU), inside
the guard (the token, the scopes and the body caps are checked as for every route) and through
the routes' own functions; the routes stay, and answer whatever the fast path does not take.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool

from hub_server.edges.fastpath import request_headers, respond
from hub_server.edges.guard import PRINCIPAL
from hub_server.errors import HubError, error_body
from hub_server.presenters.views import Views
from hub_server.routers.deps import HubDep, User, ViewsDep
from hub_server.routers.environmentshub import absolute, data
from hub_server.services import staging
from hub_server.services.auth import Principal
from hub_server.services.hub import Hub
from hub_server.services.names import check_name

router = APIRouter(prefix="/api/v1", tags=["environments hub api (official prime CLI)"])


class ResolveRequest(BaseModel):
    name: str
    visibility: str | None = None
    owner_slug: str | None = None
    team_slug: str | None = None
    team_id: str | None = None


class Declared(BaseModel):
    filename: str
    sha256: str
    size: int | None = None
    semantic_version: str | None = None
    content_hash: str | None = None


UPLOADS = "/api/v1/environmentshub/uploads/"


def resolve_push(hub: Hub, user: Principal, body: ResolveRequest) -> dict[str, Any]:
    """Open a staged push into OWNER/NAME (the caller's namespace, or ``owner_slug`` /
    ``team_slug``), after the checks a native push passes before its body. Nothing is created
    until the last finalize: the ``id`` is the push's, and ``created`` says whether the
    environment is new."""
    owner = body.owner_slug or body.team_slug or body.team_id or user.name
    check_name(owner, "owner")
    check_name(body.name, "environment")
    visibility = body.visibility.lower() if body.visibility else None
    if visibility not in (None, "public", "private"):
        raise HubError(400, "invalid_visibility", "visibility must be PUBLIC or PRIVATE")
    user.require("publish")
    hub.auth.require_publisher(user, owner, f"publish to the {owner!r} namespace")
    staging.collect(hub)
    push_id = staging.open_push(hub, user, owner, body.name, visibility)
    created = hub.catalog.environment(owner, body.name) is None
    return data({"id": push_id, "owner": {"name": owner}, "name": body.name, "created": created})


def upload_url(views: Views, token: str | None) -> str | None:
    if token is None:
        return None
    url = absolute(views, UPLOADS + token)
    if url is None:
        raise HubError(
            400, "no_public_url", "this hub has no --public-url, so it cannot hand out upload URLs"
        )
    return url


def declare(
    hub: Hub, views: Views, user: Principal, push_id: str, kind: str, body: Declared
) -> dict[str, Any]:
    """Stage the push's wheel (``kind`` "wheel") or source archive ("source")."""
    if kind == "wheel" and body.size is None:
        raise HubError(400, "invalid_size", "declare the wheel's size")
    push = staging.push_of(hub, user, push_id)
    staged_id, token = staging.declare(hub, push, kind, body.filename, body.sha256, body.size)
    ids = "wheel_id" if kind == "wheel" else "version_id"
    return data({ids: staged_id, "upload_url": upload_url(views, token)})


def finalize_wheel_of(hub: Hub, user: Principal, push_id: str, wheel_id: str) -> dict[str, Any]:
    push = staging.push_of(hub, user, push_id)
    staging.finalize_file(hub, push, wheel_id, "wheel")
    return data({"success": True})


async def publish(hub: Hub, user: Principal, push_id: str, version_id: str) -> dict[str, Any]:
    """Publish: the staged wheel and source archive through the native push's service, in
    one transaction."""
    push = await run_in_threadpool(staging.finalized_push, hub, user, push_id, version_id)
    if push["published"] is None:
        async with hub.upload_slot(user.user_id):
            latest = await hub.upload_work(staging.publish_push, user, dict(push))
    else:  # a retried finalize: published already
        latest = await run_in_threadpool(staging.latest_version, hub, push["owner"], push["name"])
    return data({"success": True, "version": latest})


async def receive_upload(hub: Hub, token: str, body: AsyncIterator[bytes]) -> dict[str, Any]:
    """An upload URL: no credential but the URL itself (single-use, short-lived), bound to the
    declared size and sha256; a body that does not match them is refused and dropped."""
    staged = await run_in_threadpool(staging.claim, hub, token)
    cap = staged["size"] if staged["size"] is not None else staging.MAX_FILE
    async with hub.upload_slot(staged["user_id"]):  # the user whose push declared it
        with tempfile.SpooledTemporaryFile(max_size=1024 * 1024) as spool:
            digest, size = hashlib.sha256(), 0
            async for chunk in body:
                size += len(chunk)
                if size > cap:
                    break
                digest.update(chunk)
                spool.write(chunk)
            expected = staged["size"] if staged["size"] is not None else size
            if size != expected or size > cap or digest.hexdigest() != staged["sha256"]:
                await run_in_threadpool(staging.received, hub, staged, None)
                raise HubError(
                    400,
                    "upload_mismatch",
                    "the bytes do not match the declared size and sha256: declare again",
                )
            await run_in_threadpool(staging.received, hub, staged, spool)
    return data({"success": True})


@router.post("/environmentshub/resolve")
def resolve(body: ResolveRequest, user: User, hub: HubDep) -> dict[str, Any]:
    """Served by ``StagedFastPath`` in a running hub, as are the routes below (``resolve_push``)."""
    return resolve_push(hub, user, body)


@router.post("/environmentshub/{push_id}/wheels")
def declare_wheel(
    push_id: str, body: Declared, user: User, hub: HubDep, views: ViewsDep
) -> dict[str, Any]:
    return declare(hub, views, user, push_id, "wheel", body)


@router.post("/environmentshub/{push_id}/wheels/{wheel_id}/finalize")
def finalize_wheel(push_id: str, wheel_id: str, user: User, hub: HubDep) -> dict[str, Any]:
    return finalize_wheel_of(hub, user, push_id, wheel_id)


@router.post("/environmentshub/{push_id}/versions")
def declare_version(
    push_id: str, body: Declared, user: User, hub: HubDep, views: ViewsDep
) -> dict[str, Any]:
    """The source archive (checked against its sha256 and the size cap; the last finalize
    checks its members and keeps it for ``env pull``: it is not an sdist, no index lists it)."""
    return declare(hub, views, user, push_id, "source", body)


@router.post("/environmentshub/{push_id}/versions/{version_id}/finalize")
async def finalize_version(
    push_id: str, version_id: str, user: User, hub: HubDep
) -> dict[str, Any]:
    return await publish(hub, user, push_id, version_id)


@router.put("/environmentshub/uploads/{token}")
async def upload(token: str, request: Request, hub: HubDep) -> dict[str, Any]:
    return await receive_upload(hub, token, request.stream())


PREFIX = "/api/v1/environmentshub/"


def staged_request(scope: dict[str, Any]) -> tuple[str, list[str]] | None:
    """Which of the staged push's routes a request is for, and its path parameters (what the
    routes above match, no more); None for any other request."""
    path = scope["path"] if scope["type"] == "http" else ""
    if not path.startswith(PREFIX):
        return None
    parts = path[len(PREFIX) :].split("/")
    if not all(parts):
        return None
    if scope["method"] == "PUT":
        return ("upload", parts[1:]) if len(parts) == 2 and parts[0] == "uploads" else None
    if scope["method"] != "POST":
        return None
    if parts == ["resolve"]:
        return "resolve", []
    if len(parts) == 2 and parts[1] in ("wheels", "versions"):
        return parts[1], parts[:1]
    if len(parts) == 4 and parts[1] in ("wheels", "versions") and parts[3] == "finalize":
        return f"finalize {parts[1]}", [parts[0], parts[2]]
    return None


def json_body(headers: dict[str, str]) -> bool:
    """Whether the framework would read the body as JSON (no content type, or a JSON one)."""
    media = headers.get("content-type")
    if media is None:
        return True
    kind = media.partition(";")[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


class StagedFastPath:
    """ASGI: the staged push's seven requests, answered without the framework's routing and
    dependency solving, inside the guard (which has authenticated the caller and caps the body)
    and through the routes' own functions. A body the route's model does not take (or that is
    not JSON) goes to the route itself, replayed, so it is refused exactly as before."""

    def __init__(self, app: Any, hub: Hub, views: Views) -> None:
        self.app, self.hub, self.views = app, hub, views

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        match = staged_request(scope)
        user = scope.get("state", {}).get(PRINCIPAL)
        if match is None or (user is None and match[0] != "upload"):
            return await self.app(scope, receive, send)
        route, params = match
        request = Request(scope, receive)
        try:
            if route == "upload":
                answer = await receive_upload(self.hub, params[0], request.stream())
            elif route == "finalize wheels":
                answer = await run_in_threadpool(finalize_wheel_of, self.hub, user, *params)
            elif route == "finalize versions":
                answer = await publish(self.hub, user, *params)
            else:
                if not json_body(request_headers(scope)):
                    return await self.app(scope, receive, send)
                raw = await request.body()
                try:
                    model = ResolveRequest if route == "resolve" else Declared
                    body: Any = model.model_validate(json.loads(raw))
                except (ValueError, ValidationError, RecursionError):  # the route's own answer
                    return await self.app(scope, replay(raw, receive), send)
                if route == "resolve":
                    answer = await run_in_threadpool(resolve_push, self.hub, user, body)
                else:
                    kind = "wheel" if route == "wheels" else "source"
                    answer = await run_in_threadpool(
                        declare, self.hub, self.views, user, params[0], kind, body
                    )
            status = 200
        except HubError as exc:
            answer, status = error_body(exc.code, exc.message), exc.status
        await respond(send, status, "application/json", json.dumps(answer).encode())


def replay(body: bytes, receive: Any) -> Any:
    """``receive`` for the route, after the fast path has read the body: the body once, then
    whatever comes next (a disconnect)."""
    sent = False

    async def again() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again
