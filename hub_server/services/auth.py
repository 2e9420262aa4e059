"""Who a request acts as, decided in one place: credentials → principal → scopes and rights.

Which credential counts depends on the route, never on what the client offers:

- the JSON API takes ``Authorization: Bearer TOKEN`` only. Basic credentials, which a browser
  caches and replays on its own (a cross-site form post would carry them), are refused there;
- the package index and file downloads (GET only) also take Basic (``__token__:TOKEN``), which is
  how installers send index credentials;
- web pages take the session cookie that ``/login`` set, and nothing else.

A token's scopes bound what it does whoever owns it: an admin's read-only token reads.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from hub_protocol.wire import Scope
from hub_server.db.accounts import Accounts, stored_scopes
from hub_server.db.catalog import Viewer
from hub_server.db.clock import now
from hub_server.db.rows import CredentialRow, EnvironmentRow, IndexHead
from hub_server.errors import HubError

INSTALLER_PREFIXES = ("/simple/", "/files/")


@dataclass
class Principal:
    user_id: int
    name: str
    is_admin: bool  # the user is an admin AND this token has the admin scope
    scopes: set[Scope]
    token_id: int = 0
    teams: list[str] = field(default_factory=list)
    expires_at: str | None = None  # the acting token's expiry (ISO 8601, UTC), if it has one

    def require(self, scope: str) -> None:
        if scope not in self.scopes and "admin" not in self.scopes:
            raise HubError(
                403,
                "insufficient_scope",
                f"this token lacks the '{scope}' scope; create one with it (prime token create "
                f"NAME --scope {scope}) and log in with it",
            )

    def require_account_change(self, what: str) -> None:
        """Minting or revoking tokens changes the account: a read-only token only reads."""
        if not self.scopes & {"publish", "admin"}:
            raise HubError(
                403,
                "insufficient_scope",
                f"{what} needs a token with the 'publish' or 'admin' scope; this one only reads",
            )

    @property
    def namespaces(self) -> list[str]:
        return [self.name, *self.teams]

    def viewer(self) -> Viewer:
        return Viewer(tuple(self.namespaces), sees_all=self.is_admin)


ANONYMOUS = Viewer()


def viewer_of(user: Principal | None) -> Viewer:
    return user.viewer() if user else ANONYMOUS


def bearer_token(headers: Any) -> str | None:
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    if auth[:6].lower() == "basic ":
        raise HubError(
            401,
            "bearer_required",
            "the API takes `Authorization: Bearer TOKEN` only (Basic is for the package index)",
        )
    return None


def installer_token(headers: Any) -> str | None:
    """Bearer, or Basic with the token as the password (how pip and uv send index credentials)."""
    auth = headers.get("authorization", "")
    if auth[:6].lower() == "basic ":
        try:
            return base64.b64decode(auth[6:]).decode().partition(":")[2] or None
        except (ValueError, UnicodeDecodeError):
            raise HubError(401, "invalid_token", "malformed basic auth header") from None
    return bearer_token(headers)


class Authenticator:
    def __init__(self, accounts: Accounts) -> None:
        self.accounts = accounts

    def credential(self, path: str, method: str, headers: Any) -> str | None:
        if method in ("GET", "HEAD") and path.startswith(INSTALLER_PREFIXES):
            return installer_token(headers)
        return bearer_token(headers)

    def from_token(self, token: str | None) -> Principal | None:
        if not token:
            return None
        row = self.accounts.token_row(token)
        if row is None or row.revoked_at is not None:
            raise HubError(
                401,
                "invalid_token",
                "the API token is not valid; run `prime login` with a current token",
            )
        if row.expires_at is not None and row.expires_at <= now():
            raise HubError(
                401, "token_expired", "the API token has expired; create a new one (prime login)"
            )
        return self._principal(row)

    def from_session(self, session: str | None) -> Principal | None:
        """The signed-in user of a web session, or None (expired, revoked, unknown)."""
        if not session:
            return None
        row = self.accounts.session_row(session)
        current = now()
        if (
            row is None
            or row.revoked_at is not None
            or (row.expires_at is not None and row.expires_at <= current)
            or row.session_expires <= current
        ):
            return None
        return self._principal(row)

    def _principal(self, row: CredentialRow) -> Principal:
        scopes = stored_scopes(row.scopes)
        return Principal(
            row.id,
            row.name,
            bool(row.is_admin) and "admin" in scopes,
            scopes,
            row.token_id,
            self.accounts.teams_of(row.id),
            row.expires_at,
        )

    # --- rights over a namespace --------------------------------------------------------------------
    def role_in(self, user: Principal, owner: str) -> str | None:
        """``"self"`` for one's own namespace, the team role (``owner``/``member``), or None."""
        if owner == user.name:
            return "self"
        return self.accounts.role_in(owner, user.user_id)

    def can_publish(self, user: Principal, owner: str) -> bool:
        return user.is_admin or owner in user.namespaces

    def can_administer(self, user: Principal, owner: str) -> bool:
        """Destructive rights (delete, yank, remove members): its user, a team owner, an admin."""
        return user.is_admin or self.role_in(user, owner) in ("self", "owner")

    @staticmethod
    def can_read(user: Principal | None, env: EnvironmentRow | IndexHead) -> bool:
        if env.visibility == "public":
            return True
        return user is not None and (user.is_admin or env.owner in user.namespaces)

    def require_publisher(self, user: Principal, owner: str, what: str) -> None:
        """The scope and namespace check every upload passes before its body is read."""
        user.require("publish")
        if not self.can_publish(user, owner):
            raise HubError(403, "not_owner", f"only {owner} and its members can {what}")
