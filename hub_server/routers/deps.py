"""What routes declare they need: the hub, and the principal of the request's credentials."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from hub_server.edges.guard import PRINCIPAL
from hub_server.errors import HubError
from hub_server.presenters.views import Views
from hub_server.services.auth import Principal
from hub_server.services.hub import Hub


# async: FastAPI runs a plain ``def`` dependency in the thread pool, a hop per request for a lookup
async def hub_of(request: Request) -> Hub:
    return request.app.state.hub


async def views_of(request: Request) -> Views:
    return request.app.state.views


async def optional_user(request: Request) -> Principal | None:
    """The request's principal: the one the guard authenticated from these very headers (every
    request that changes state), else looked up here (reads, which the guard passes)."""
    known = request.scope.get("state", {}).get(PRINCIPAL)
    if known is not None:
        return known
    hub: Hub = request.app.state.hub
    token = hub.auth.credential(request.url.path, request.method, request.headers)
    if token is None:
        return None  # anonymous: no database round trip at all
    return await hub.read(hub.auth.from_token, token)


async def required_user(user: Annotated[Principal | None, Depends(optional_user)]) -> Principal:
    if user is None:
        raise HubError(401, "auth_required", "this needs an API token: run `prime login`")
    return user


HubDep = Annotated[Hub, Depends(hub_of)]
ViewsDep = Annotated[Views, Depends(views_of)]
User = Annotated[Principal, Depends(required_user)]
MaybeUser = Annotated[Principal | None, Depends(optional_user)]
