"""Accounts: the caller (``/me``), users (admins create them), tokens, teams and members."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, Response

from hub_protocol.wire import (
    AccountDeleted,
    Me,
    TeamCreate,
    TeamMember,
    TokenCreate,
    TokenCreated,
    TokenInfo,
    UserCreate,
)
from hub_server.db.accounts import stored_scopes
from hub_server.db.clock import now
from hub_server.errors import HubError
from hub_server.routers.deps import HubDep, User
from hub_server.services.account_deletion import delete_account
from hub_server.services.names import check_name, check_text

router = APIRouter(prefix="/api/v1", tags=["accounts"])


@router.get("/me", response_model=Me)
def me(user: User) -> Me:
    return Me(
        user=user.name, is_admin=user.is_admin, scopes=sorted(user.scopes), owners=user.namespaces
    )


@router.post("/users", response_model=TokenCreated, status_code=201)
def create_user(body: UserCreate, user: User, hub: HubDep) -> TokenCreated:
    if not user.is_admin:
        raise HubError(
            403,
            "admin_required",
            "only an admin, with a token that has the admin scope, can create users",
        )
    check_name(body.name, "user")
    token, scopes = hub.accounts.create_user(body.name, body.is_admin)
    return TokenCreated(token=token, name="initial", scopes=scopes)


@router.delete("/me", response_model=AccountDeleted)
def delete_own_account(user: User, hub: HubDep) -> AccountDeleted:
    """The account owner deletes the account (``services.account_deletion``): a read-only
    token only reads."""
    user.require_account_change("deleting the account")
    return AccountDeleted(**vars(delete_account(hub, user.name)))


@router.delete("/users/{name}", response_model=AccountDeleted)
def delete_user(name: str, user: User, hub: HubDep) -> AccountDeleted:
    if not user.is_admin:
        raise HubError(
            403,
            "admin_required",
            "only an admin, with a token that has the admin scope, can delete other users' "
            "accounts (delete your own with DELETE /api/v1/me: prime account delete --yes)",
        )
    return AccountDeleted(**vars(delete_account(hub, name)))


@router.post("/tokens", response_model=TokenCreated, status_code=201)
def create_token(body: TokenCreate, user: User, hub: HubDep) -> TokenCreated:
    """A token never outranks or outlives the token that made it: its scopes are among the
    creator's, and it expires no later than the creator does."""
    user.require_account_change("creating a token")
    check_text(body.name, "the token name")
    if not set(body.scopes) <= user.scopes:
        raise HubError(
            403, "insufficient_scope", "a token cannot grant scopes its creator's token lacks"
        )
    expires_at = None
    if body.expires_in_days is not None:
        expires_at = now(timedelta(days=body.expires_in_days))
    if user.expires_at is not None and (expires_at is None or expires_at > user.expires_at):
        expires_at = user.expires_at
    token, token_id = hub.accounts.create_token(
        user.user_id, body.name, list(body.scopes), expires_at
    )
    return TokenCreated(
        token=token, name=body.name, scopes=body.scopes, id=token_id, expires_at=expires_at
    )


@router.get("/tokens", response_model=list[TokenInfo])
def list_tokens(user: User, hub: HubDep) -> list[TokenInfo]:
    return [
        TokenInfo(
            id=r.id,
            name=r.name,
            scopes=sorted(stored_scopes(r.scopes)),
            created_at=r.created_at,
            expires_at=r.expires_at,
            revoked=r.revoked_at is not None,
        )
        for r in hub.accounts.tokens(user.user_id)
    ]


@router.delete("/tokens/{token_id}", status_code=204)
def revoke_token(token_id: int, user: User, hub: HubDep) -> Response:
    """Any token may revoke itself; revoking another needs a token that may change the account
    and holds every scope of the one it revokes."""
    if token_id != user.token_id:
        user.require_account_change("revoking another token")
    hub.accounts.revoke_token(token_id, user.user_id, user.is_admin, user.scopes)
    return Response(status_code=204)


@router.post("/teams", status_code=201)
def create_team(body: TeamCreate, user: User, hub: HubDep) -> dict[str, str]:
    user.require("publish")
    check_name(body.name, "team")
    hub.accounts.create_team(body.name, user.user_id)
    return {"team": body.name}


def _owned_team(hub: HubDep, user: User, team: str, member: str, what: str) -> tuple[int, int]:
    user.require("publish")
    if not user.is_admin and hub.accounts.role_in(team, user.user_id) != "owner":
        raise HubError(403, "not_team_owner", f"only owners of team {team!r} can {what} members")
    return hub.accounts.team_member_ids(team, member)


@router.post("/teams/{team}/members", status_code=201)
def add_member(team: str, body: TeamMember, user: User, hub: HubDep) -> dict[str, str]:
    hub.accounts.add_member(*_owned_team(hub, user, team, body.user, "add"))
    return {"team": team, "user": body.user}


@router.delete("/teams/{team}/members/{member}", status_code=204)
def remove_member(team: str, member: str, user: User, hub: HubDep) -> Response:
    """Team owners remove members (or other owners, while one owner remains); anyone may leave."""
    if member == user.name:
        user.require("publish")
        team_id, user_id = hub.accounts.team_member_ids(team, member)
    else:
        team_id, user_id = _owned_team(hub, user, team, member, "remove")
    hub.accounts.remove_member(team_id, user_id)
    return Response(status_code=204)
