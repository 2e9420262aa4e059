"""``prime login`` of Prime's official CLI: ``POST /api/v1/auth_challenge/generate`` (no
credentials) and ``GET /api/v1/auth_challenge/status`` (the challenge's own status token as its
bearer, not an API token). The user approves in the browser, on the web pages' challenge page
(``web.py``); the flow and its bounds are ``hub_server.services.login``'s.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel

from hub_server.routers.deps import HubDep, peer_of_request
from hub_server.services import login
from hub_server.services.auth import bearer_token

router = APIRouter(prefix="/api/v1", tags=["login (official prime CLI)"])


class ChallengeRequest(BaseModel):
    encryptionPublicKey: str  # the official client's field name
    # per-key caps on sandboxes and tunnels (``prime login --max-...``): this hub runs
    # neither, so there is nothing for them to cap; accepted and not kept
    limits: dict[str, int] | None = None


@router.post("/auth_challenge/generate")
def generate(body: ChallengeRequest, request: Request, hub: HubDep) -> dict[str, Any]:
    """A challenge for the CLI to print and poll; 200, as the official client expects."""
    return login.generate(hub, body.encryptionPublicKey, peer_of_request(request))


@router.get("/auth_challenge/status")
def status(challenge: str, request: Request, hub: HubDep) -> dict[str, Any]:
    """Pending: ``result`` null. Approved: ``result`` is the new token, sealed to the CLI's
    key, given once. Anything else (denied, expired, fetched, a wrong status token): 404."""
    return login.status(hub, challenge, bearer_token(request.headers))
