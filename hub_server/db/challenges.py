"""``prime login``'s device flow (Prime's official CLI): every SQL statement about login challenges.

A challenge lives in the database, not in a hub process: the CLI's ``generate``, the browser's
approval and the CLI's polls may each reach another process behind a load balancer. Its code and
its status token are kept only as sha256 hashes (the code is in a URL the user opens; the status
token is what fetches the new token). No token exists until an approved challenge is fetched:
that fetch mints it, in the transaction that deletes the challenge, so a challenge yields at most
one token and an approval never fetched leaves none behind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from hub_protocol.wire import Scope
from hub_server.db.accounts import Accounts, hash_secret, stored_scopes
from hub_server.db.clock import now
from hub_server.db.engine import Database, typed
from hub_server.db.rows import ChallengeRow
from hub_server.errors import TooMany

CHALLENGE_LOCK = 7242003  # PostgreSQL advisory lock: pending challenges are counted, then added
Outcome = Literal["gone", "pending", "denied", "delivered"]


class LoginChallenges:
    def __init__(self, database: Database, accounts: Accounts) -> None:
        self.database = database
        self.accounts = accounts
        self.postgres = database.dialect == "postgresql"

    def _evict_from_busiest(self, db: Any) -> bool:
        """Drop the oldest pending challenge of the client with the most, if it has more than
        one; False if none has (a client's only challenge is never dropped for another's: with
        every client at one, the oldest was a waiting user's, pushed out by a flood)."""
        busiest = db.execute(
            "SELECT client FROM login_challenges WHERE state='pending' GROUP BY client "
            "HAVING COUNT(*) > 1 ORDER BY COUNT(*) DESC, MIN(created_at) LIMIT 1"
        ).fetchone()
        if busiest is None:
            return False
        oldest = db.execute(
            "SELECT code_hash FROM login_challenges WHERE client=? AND state='pending' "
            "ORDER BY created_at LIMIT 1",
            (busiest["client"],),
        ).fetchone()
        db.execute("DELETE FROM login_challenges WHERE code_hash=?", (oldest["code_hash"],))
        return True

    def open(
        self,
        code: str,
        status_token: str,
        public_key: str,
        client: str,
        expires_at: str,
        per_client: int,
        pending: int,
    ) -> None:
        """A new pending challenge, unless ``client`` already has ``per_client`` pending
        (counted in the inserting transaction, so concurrent requests cannot race past it). With
        ``pending`` in all, the oldest waiting challenge of the client holding the most goes to
        make room when it holds more than one: a flood from many addresses costs its own
        challenges, never a waiting login's (a flood of one challenge from each of ``pending``
        addresses is refused new ones until they expire).
        Expired challenges are purged as we go."""
        stamp = now()
        with self.database.transaction() as db:
            if self.postgres:
                db.execute("SELECT pg_advisory_xact_lock(?)", (CHALLENGE_LOCK,))
            db.execute("DELETE FROM login_challenges WHERE expires_at <= ?", (stamp,))
            mine = db.execute(
                "SELECT COUNT(*) AS n FROM login_challenges WHERE client=?", (client,)
            ).fetchone()["n"]
            if mine >= per_client:
                raise TooMany(
                    "too_many_logins",
                    f"this address already has {mine} logins waiting for approval: approve or "
                    "deny them, or wait until they expire",
                )
            total = db.execute("SELECT COUNT(*) AS n FROM login_challenges").fetchone()["n"]
            if total >= pending and not self._evict_from_busiest(db):
                raise TooMany(
                    "too_many_logins",
                    "the hub has too many logins waiting for approval: retry in a few minutes",
                )
            db.execute(
                "INSERT INTO login_challenges (code_hash, status_hash, public_key, client, "
                "created_at, expires_at, state) VALUES (?,?,?,?,?,?,'pending')",
                (
                    hash_secret(code),
                    hash_secret(status_token),
                    public_key,
                    client,
                    stamp,
                    expires_at,
                ),
            )

    def pending(self, code: str) -> ChallengeRow | None:
        """The challenge ``code`` names while it waits for a decision, or None."""
        with self.database.read() as db:
            row = db.execute(
                "SELECT client, created_at, expires_at FROM login_challenges "
                "WHERE code_hash=? AND state='pending' AND expires_at > ?",
                (hash_secret(code), now()),
            ).fetchone()
        return None if row is None else typed(ChallengeRow, row)

    def approve(
        self, code: str, approver_token_id: int, scopes: set[Scope], token_expires: str | None
    ) -> bool:
        """Approve a pending challenge: its token will be the approving session's user's, with
        ``scopes``, expiring at ``token_expires``. False if ``code`` names no pending challenge
        (unknown, expired, already decided)."""
        return self._decide(code, "approved", approver_token_id, scopes, token_expires)

    def deny(self, code: str, approver_token_id: int) -> bool:
        return self._decide(code, "denied", approver_token_id, set(), None)

    def _decide(
        self,
        code: str,
        state: str,
        approver_token_id: int,
        scopes: set[Scope],
        token_expires: str | None,
    ) -> bool:
        with self.database.transaction() as db:
            changed = db.execute(
                "UPDATE login_challenges SET state=?, approver_token_id=?, scopes=?, "
                "token_expires=? WHERE code_hash=? AND state='pending' AND expires_at > ?",
                (
                    state,
                    approver_token_id,
                    ",".join(sorted(scopes)),
                    token_expires,
                    hash_secret(code),
                    now(),
                ),
            ).rowcount
        return changed == 1

    def take(
        self, code: str, status_token: str, token_name: str, seal: Callable[[str, str], str]
    ) -> tuple[Outcome, str | None]:
        """The CLI's poll. Pending: ``("pending", None)``. Approved: the challenge is deleted
        and a new token minted for the approver, returned sealed (``seal(public_key, token)``)
        in the same transaction (a seal that fails mints nothing). Denied, or approved by a
        token since revoked or expired: deleted, ``("denied", None)``. Unknown, expired, already
        taken, or the wrong status token: ``("gone", None)``."""
        stamp = now()
        keys = (hash_secret(code), hash_secret(status_token))
        with self.database.transaction() as db:
            row = db.execute(
                "SELECT state, expires_at FROM login_challenges WHERE code_hash=? AND status_hash=?",
                keys,
            ).fetchone()
            if row is None:
                return "gone", None
            if row["state"] == "pending" and row["expires_at"] > stamp:
                return "pending", None
            # claimed by deleting it: of two polls at once, one deletes the row, the other
            # (PostgreSQL: after waiting for the first) deletes nothing and gets nothing
            row = db.execute(
                "DELETE FROM login_challenges WHERE code_hash=? AND status_hash=? "
                "RETURNING state, expires_at, public_key, scopes, token_expires, approver_token_id",
                keys,
            ).fetchone()
            if row is None or row["expires_at"] <= stamp:
                return "gone", None
            approver = db.execute(
                "SELECT user_id FROM tokens WHERE id=? AND revoked_at IS NULL "
                "AND (expires_at IS NULL OR expires_at > ?)",
                (row["approver_token_id"], stamp),
            ).fetchone()
            if row["state"] != "approved" or approver is None:
                return "denied", None
            token, _ = self.accounts.new_token(
                db,
                approver["user_id"],
                token_name,
                stored_scopes(row["scopes"]),
                row["token_expires"],
            )
            return "delivered", seal(row["public_key"], token)
