"""Deleting a user account: everything it owns goes, and nothing of it comes back to whoever
registers its name next.

One transaction removes the user's environments (and those of every team it is the only member
of) with their versions, files, evals and datasets, after retiring every version number they
ever published (``retired_names``: ``owner/name@version`` never resolves to other bytes, whoever
owns ``owner`` later); the evals and datasets it attached to others' environments; its tokens
(so its sessions and pending logins with them), its team memberships, its staged pushes and
evals, and the user row. Ids are never given out again (``hub_server.db.schema``), so nothing
keyed by one (a cached page, a token id, a download count) can come to mean the next user's. The
bytes go with the blob collector's next round (``blob_collection``), as for any other delete;
this process drops its cached pages and search answers at once. A push of the account still
uploading finds its token gone at its commit and publishes nothing (``Catalog.commit_version``;
on PostgreSQL the lock taken here orders the two).

Refused: the last admin (no one could create users through the API any more) and the last owner
of a team that has other members (a team keeps an owner; the members are removed first).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hub_server.db.accounts import NAMESPACE_LOCK
from hub_server.db.clock import now
from hub_server.errors import Conflicting, NotFound
from hub_server.services import official_evals, staging
from hub_server.services.hub import Hub

EXPIRED = "1970-01-01T00:00:00Z"  # what staged uploads of a deleted account expire at


@dataclass
class DeletedAccount:
    """What went: the user, the teams that went with it, the environments (owner/name)."""

    user: str
    teams: list[str] = field(default_factory=list)
    environments: list[str] = field(default_factory=list)


def _in(values: list[Any]) -> str:
    return ",".join("?" * len(values))


def _check_deletable(db: Any, user_id: int, name: str, is_admin: bool) -> list[tuple[int, str]]:
    """The teams that go with the user (it is their only member); refusals as the module says."""
    if is_admin:
        admins = db.execute("SELECT COUNT(*) AS n FROM users WHERE is_admin=1").fetchone()["n"]
        if admins <= 1:
            raise Conflicting(
                "last_admin",
                f"{name} is the hub's only admin: create another admin (prime hub create-user "
                "NAME --admin) before deleting this one",
            )
    teams = db.execute(
        "SELECT t.id, t.name, m.role, "
        "(SELECT COUNT(*) FROM team_members a WHERE a.team_id = t.id) AS members, "
        "(SELECT COUNT(*) FROM team_members o WHERE o.team_id = t.id AND o.role = 'owner') "
        "AS owners FROM teams t JOIN team_members m ON m.team_id = t.id WHERE m.user_id = ? "
        "ORDER BY t.name",
        (user_id,),
    ).fetchall()
    kept = [
        t["name"] for t in teams if t["role"] == "owner" and t["owners"] == 1 and t["members"] > 1
    ]
    if kept:
        raise Conflicting(
            "last_owner",
            f"{name} is the only owner of team(s) {', '.join(kept)}, which have other members: "
            "remove them from the team first (DELETE /api/v1/teams/TEAM/members/USER), then "
            "delete the account",
        )
    return [(t["id"], t["name"]) for t in teams if t["members"] == 1]


def delete_account(hub: Hub, name: str) -> DeletedAccount:
    """Delete user ``name`` and everything it owns (the module docstring); 404 if none."""
    with hub.database.transaction() as db:
        if hub.database.dialect == "postgresql":  # no team or member is added meanwhile
            db.execute("SELECT pg_advisory_xact_lock(?)", (NAMESPACE_LOCK,))
        row = db.execute("SELECT id, is_admin FROM users WHERE name=?", (name,)).fetchone()
        if row is None:
            raise NotFound("user_not_found", f"no user {name!r}")
        user_id = row["id"]
        teams = _check_deletable(db, user_id, name, bool(row["is_admin"]))
        owners = [name, *(team for _, team in teams)]
        envs = db.execute(
            f"SELECT id, owner, name FROM environments WHERE owner IN ({_in(owners)}) ORDER BY id",
            owners,
        ).fetchall()
        env_ids = [e["id"] for e in envs]
        if env_ids:
            for table in ("versions", "retired_versions"):  # as Catalog.delete_environment
                db.execute(
                    "INSERT INTO retired_names (owner, name_key, version_key) "
                    f"SELECT e.owner, e.name_key, t.version_key FROM {table} t "
                    f"JOIN environments e ON e.id = t.env_id WHERE e.id IN ({_in(env_ids)}) "
                    "ON CONFLICT DO NOTHING",
                    env_ids,
                )
            db.execute(f"DELETE FROM environments WHERE id IN ({_in(env_ids)})", env_ids)
        for table in ("evals", "datasets"):  # attached to others' environments
            db.execute(f"DELETE FROM {table} WHERE uploaded_by=?", (name,))
        db.execute(
            f"UPDATE staged_pushes SET expires_at=? WHERE user_id=? OR owner IN ({_in(owners)})",
            (EXPIRED, user_id, *owners),
        )
        db.execute("UPDATE staged_evals SET expires_at=? WHERE user_id=?", (EXPIRED, user_id))
        tokens = "SELECT id FROM tokens WHERE user_id=?"
        db.execute(f"DELETE FROM sessions WHERE token_id IN ({tokens})", (user_id,))
        db.execute(
            f"DELETE FROM login_challenges WHERE approver_token_id IN ({tokens})", (user_id,)
        )
        db.execute("DELETE FROM tokens WHERE user_id=?", (user_id,))
        db.execute("DELETE FROM team_members WHERE user_id=?", (user_id,))
        for team_id, _ in teams:
            db.execute("DELETE FROM teams WHERE id=?", (team_id,))
        db.execute("DELETE FROM users WHERE id=?", (user_id,))
        db.execute("DELETE FROM sessions WHERE expires_at <= ?", (now(),))
    for env_id in env_ids:
        hub.forget_environment(env_id)
    staging.collect(hub)  # the staged bytes of its pushes and evals, expired above
    official_evals.collect(hub)
    return DeletedAccount(
        name, [team for _, team in teams], [f"{e['owner']}/{e['name']}" for e in envs]
    )
