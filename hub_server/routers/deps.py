"""What routes declare they need: the hub, and the principal of the request's credentials."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from hub_server.edges.guard import PRINCIPAL
from hub_server.errors import HubError
from hub_server.presenters.views import Views
from hub_server.services.auth import Principal
from hub_server.services.hub import Hub
from verifiers.asgi.peers import peer_of


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


def peer_of_request(request: Request) -> str:
    """Whom an anonymous request is charged to, in every per-peer limit of the hub
    (``verifiers.asgi.peers``): one IPv4 address, one IPv6 /64, one local user of this machine
    (all of 127/8). Behind a trusted proxy, the address it forwards."""
    client = request.client or ("", None)
    server = request.scope.get("server")
    return peer_of(client[0], client[1], tuple(server) if server else None)
