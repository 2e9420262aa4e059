"""The staged push of Prime's official CLI (``prime env push``): resolve, declare, PUT to an
upload URL, finalize (``hub_server.services.staging`` keeps what is staged).

Nothing is visible until the last finalize, which publishes the staged wheel through the native
push's service, in one transaction, after exactly its checks. An upload URL is a capability:
single-use, short-lived, bound to the declared size and sha256, on the hub's own origin; it is
the one request the guard lets through without a token.
"""

from __future__ import annotations

import hashlib
import tempfile
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from hub_server.errors import HubError
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


@router.post("/environmentshub/resolve")
def resolve(body: ResolveRequest, user: User, hub: HubDep) -> dict[str, Any]:
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


def declare(hub: Hub, user: Principal, push_id: str, kind: str, body: Declared) -> tuple:
    push = staging.push_of(hub, user, push_id)
    return staging.declare(hub, push, kind, body.filename, body.sha256, body.size)


@router.post("/environmentshub/{push_id}/wheels")
def declare_wheel(
    push_id: str, body: Declared, user: User, hub: HubDep, views: ViewsDep
) -> dict[str, Any]:
    if body.size is None:
        raise HubError(400, "invalid_size", "declare the wheel's size")
    staged_id, token = declare(hub, user, push_id, "wheel", body)
    return data({"wheel_id": staged_id, "upload_url": upload_url(views, token)})


@router.post("/environmentshub/{push_id}/wheels/{wheel_id}/finalize")
def finalize_wheel(push_id: str, wheel_id: str, user: User, hub: HubDep) -> dict[str, Any]:
    push = staging.push_of(hub, user, push_id)
    staging.finalize_file(hub, push, wheel_id, "wheel")
    return data({"success": True})


@router.post("/environmentshub/{push_id}/versions")
def declare_version(
    push_id: str, body: Declared, user: User, hub: HubDep, views: ViewsDep
) -> dict[str, Any]:
    """The source archive (checked against its sha256 and the size cap; the last finalize
    checks its members and keeps it for ``env pull``: it is not an sdist, no index lists it)."""
    staged_id, token = declare(hub, user, push_id, "source", body)
    return data({"version_id": staged_id, "upload_url": upload_url(views, token)})


@router.post("/environmentshub/{push_id}/versions/{version_id}/finalize")
async def finalize_version(
    push_id: str, version_id: str, user: User, hub: HubDep
) -> dict[str, Any]:
    """Publish: the staged wheel and source archive through the native push's service, in
    one transaction."""
    push = await run_in_threadpool(staging.finalized_push, hub, user, push_id, version_id)
    if push["published"] is None:
        async with hub.upload_slot():
            latest = await hub.upload_work(staging.publish_push, user, dict(push))
    else:  # a retried finalize: published already
        latest = await run_in_threadpool(staging.latest_version, hub, push["owner"], push["name"])
    return data({"success": True, "version": latest})


@router.put("/environmentshub/uploads/{token}")
async def upload(token: str, request: Request, hub: HubDep) -> dict[str, Any]:
    """An upload URL: no credential but the URL itself (single-use, short-lived), bound to the
    declared size and sha256; a body that does not match them is refused and dropped."""
    staged = await run_in_threadpool(staging.claim, hub, token)
    cap = staged["size"] if staged["size"] is not None else staging.MAX_FILE
    async with hub.upload_slot():
        with tempfile.SpooledTemporaryFile(max_size=1024 * 1024) as spool:
            digest, size = hashlib.sha256(), 0
            async for chunk in request.stream():
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
