"""Users, teams, tokens and web sessions: every SQL statement about who is who."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import Any, TypeGuard, get_args

from hub_protocol.wire import Scope
from hub_server.db.clock import now
from hub_server.db.engine import Conflict, Database, typed
from hub_server.db.rows import CredentialRow, SessionRow, TokenRow
from hub_server.errors import Conflicting, NotAllowed, NotFound

PRINCIPAL_COLUMNS = (
    "u.id, u.name, u.is_admin, t.id AS token_id, t.scopes, t.expires_at, t.revoked_at"
)
# An owner name as a reader might confuse it: case, '.', '-' and '_' dropped (SQL, one spelling
# for both backends; names are ASCII, so lower() is the same on both).
OWNER_KEY = "replace(replace(replace(lower({}), '.', ''), '-', ''), '_', '')"
NAMESPACE_LOCK = 7242002  # PostgreSQL advisory lock: one user or team created at a time


def stored_scopes(text: str) -> set[Scope]:
    """A token's ``scopes`` column (comma-joined) as scopes: a token minted with none stores
    ``""``, which is no scope, not the scope ``""``."""
    return {scope for scope in text.split(",") if _is_scope(scope)}


def _is_scope(value: str) -> TypeGuard[Scope]:
    return value in get_args(Scope)


def hash_secret(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class Accounts:
    def __init__(self, database: Database) -> None:
        self.database = database
        self.postgres = database.dialect == "postgresql"

    # --- users and tokens ------------------------------------------------------------------------
    def _check_free(self, db: Any, name: str) -> None:
        """A new user or team (both own a namespace) may not take a name that reads as an
        existing owner's: ``al.ice``, ``alice-`` or ``Alice_`` beside ``alice`` would pass for
        it on every page and install line. Creations are serialized (SQLite has one writer;
        PostgreSQL takes a lock), so two at once cannot both pass the check."""
        if self.postgres:
            db.execute("SELECT pg_advisory_xact_lock(?)", (NAMESPACE_LOCK,))
        key, new_key = OWNER_KEY.format("name"), OWNER_KEY.format("?")
        row = db.execute(
            f"SELECT name FROM users WHERE {key} = {new_key} "
            f"UNION ALL SELECT name FROM teams WHERE {key} = {new_key} LIMIT 1",
            (name, name),
        ).fetchone()
        if row is not None and row["name"] == name:
            raise Conflicting("name_taken", f"the name {name!r} is taken by a user or team")
        if row is not None:  # the other spelling is not repeated: the answer is about this one
            raise Conflicting(
                "name_taken",
                f"{name!r} reads as the name of an existing user or team: names that differ "
                "only in '.', '-', '_' or case are one name",
            )

    def create_user(self, name: str, is_admin: bool) -> tuple[str, list[Scope]]:
        """The new user's first token and its scopes (admin included for an admin)."""
        scopes: list[Scope] = ["admin", "publish", "read"] if is_admin else ["publish", "read"]
        try:
            with self.database.transaction() as db:
                self._check_free(db, name)
                user_id = db.execute(
                    "INSERT INTO users (name, is_admin, created_at) VALUES (?,?,?) RETURNING id",
                    (name, int(is_admin), now()),
                ).fetchone()["id"]
                token, _ = self.new_token(db, user_id, "initial", scopes)
        except Conflict:
            raise Conflicting("name_taken", f"the name {name!r} is taken") from None
        return token, scopes

    def new_token(
        self,
        db: Any,
        user_id: int,
        name: str,
        scopes: Iterable[Scope],
        expires_at: str | None = None,
    ) -> tuple[str, int]:
        token = "vfh_" + secrets.token_urlsafe(32)
        token_id = db.execute(
            "INSERT INTO tokens (user_id, name, token_hash, scopes, created_at, expires_at) "
            "VALUES (?,?,?,?,?,?) RETURNING id",
            (user_id, name, hash_secret(token), ",".join(sorted(set(scopes))), now(), expires_at),
        ).fetchone()["id"]
        return token, token_id

    def create_token(
        self, user_id: int, name: str, scopes: Iterable[Scope], expires_at: str | None
    ) -> tuple[str, int]:
        with self.database.transaction() as db:
            return self.new_token(db, user_id, name, scopes, expires_at)

    def token_row(self, token: str) -> CredentialRow | None:
        with self.database.read() as db:
            row = db.execute(
                f"SELECT {PRINCIPAL_COLUMNS} FROM tokens t JOIN users u ON u.id=t.user_id "
                "WHERE t.token_hash=?",
                (hash_secret(token),),
            ).fetchone()
        return None if row is None else typed(CredentialRow, row)

    def session_row(self, session: str) -> SessionRow | None:
        with self.database.read() as db:
            row = db.execute(
                f"SELECT {PRINCIPAL_COLUMNS}, s.expires_at AS session_expires FROM sessions s "
                "JOIN tokens t ON t.id=s.token_id JOIN users u ON u.id=t.user_id "
                "WHERE s.session_hash=?",
                (hash_secret(session),),
            ).fetchone()
        return None if row is None else typed(SessionRow, row)

    def tokens(self, user_id: int) -> list[TokenRow]:
        with self.database.read() as db:
            rows = db.execute(
                "SELECT * FROM tokens WHERE user_id=? ORDER BY id", (user_id,)
            ).fetchall()
        return [typed(TokenRow, row) for row in rows]

    def revoke_token(
        self, token_id: int, user_id: int, is_admin: bool, scopes: AbstractSet[Scope] | None = None
    ) -> None:
        """``scopes``: the acting token's; it may revoke only tokens holding none beyond them
        (admin holds every scope)."""
        with self.database.transaction() as db:
            row = db.execute(
                "SELECT id, user_id, scopes FROM tokens WHERE id=?", (token_id,)
            ).fetchone()
            if row is None or (row["user_id"] != user_id and not is_admin):
                raise NotFound("token_not_found", f"you have no token {token_id}")
            if scopes is not None and "admin" not in scopes:
                if not stored_scopes(row["scopes"]) <= scopes:
                    raise NotAllowed(
                        "insufficient_scope",
                        "a token cannot revoke a token with scopes it lacks",
                    )
            db.execute("UPDATE tokens SET revoked_at=? WHERE id=?", (now(), token_id))

    # --- teams -----------------------------------------------------------------------------------
    def create_team(self, name: str, owner_id: int) -> None:
        try:
            with self.database.transaction() as db:
                self._check_free(db, name)
                team_id = db.execute(
                    "INSERT INTO teams (name, created_at) VALUES (?,?) RETURNING id", (name, now())
                ).fetchone()["id"]
                db.execute(
                    "INSERT INTO team_members (team_id, user_id, role) VALUES (?,?,?)",
                    (team_id, owner_id, "owner"),
                )
        except Conflict:
            raise Conflicting("name_taken", f"the name {name!r} is taken") from None

    def team_member_ids(self, team: str, user: str) -> tuple[int, int]:
        with self.database.read() as db:
            team_row = db.execute("SELECT id FROM teams WHERE name=?", (team,)).fetchone()
            member = db.execute("SELECT id FROM users WHERE name=?", (user,)).fetchone()
        if team_row is None or member is None:
            raise NotFound("not_found", f"no team {team!r} or user {user!r}")
        return team_row["id"], member["id"]

    def add_member(self, team_id: int, user_id: int) -> None:
        with self.database.transaction() as db:
            db.execute(
                "INSERT INTO team_members (team_id, user_id, role) VALUES (?,?,?) "
                "ON CONFLICT DO NOTHING",
                (team_id, user_id, "member"),
            )

    def remove_member(self, team_id: int, user_id: int) -> None:
        """Remove a member; the last owner of a team cannot be removed (someone must own it)."""
        with self.database.transaction() as db:
            row = db.execute(
                "SELECT role FROM team_members WHERE team_id=? AND user_id=?", (team_id, user_id)
            ).fetchone()
            if row is None:
                raise NotFound("not_a_member", "that user is not a member of the team")
            if row["role"] == "owner":
                owners = db.execute(
                    "SELECT COUNT(*) AS n FROM team_members WHERE team_id=? AND role='owner'",
                    (team_id,),
                ).fetchone()["n"]
                if owners <= 1:
                    raise Conflicting(
                        "last_owner", "a team keeps at least one owner; add another first"
                    )
            db.execute("DELETE FROM team_members WHERE team_id=? AND user_id=?", (team_id, user_id))

    def role_in(self, owner: str, user_id: int) -> str | None:
        with self.database.read() as db:
            row = db.execute(
                "SELECT m.role FROM teams t JOIN team_members m ON m.team_id=t.id "
                "WHERE t.name=? AND m.user_id=?",
                (owner, user_id),
            ).fetchone()
        return row["role"] if row else None

    def teams_of(self, user_id: int) -> list[str]:
        with self.database.read() as db:
            rows = db.execute(
                "SELECT t.name FROM teams t JOIN team_members m ON m.team_id=t.id "
                "WHERE m.user_id=? ORDER BY t.name",
                (user_id,),
            ).fetchall()
        return [r["name"] for r in rows]

    # --- web sessions ----------------------------------------------------------------------------
    def create_session(self, session: str, token_id: int, expires_at: str) -> None:
        stamp = now()
        with self.database.transaction() as db:
            db.execute("DELETE FROM sessions WHERE expires_at <= ?", (stamp,))  # purge as we go
            db.execute(
                "INSERT INTO sessions (session_hash, token_id, created_at, expires_at) "
                "VALUES (?,?,?,?)",
                (hash_secret(session), token_id, stamp, expires_at),
            )

    def delete_session(self, session: str) -> None:
        with self.database.transaction() as db:
            db.execute("DELETE FROM sessions WHERE session_hash=?", (hash_secret(session),))

    def purge_sessions(self) -> int:
        with self.database.transaction() as db:
            return db.execute("DELETE FROM sessions WHERE expires_at <= ?", (now(),)).rowcount
