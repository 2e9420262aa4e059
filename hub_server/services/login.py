"""``prime login`` of Prime's official CLI (``prime==0.18.0``): a device flow.

The CLI makes an RSA key pair and posts its public key (PEM) to ``generate``, with no
credentials; it gets a ``challenge`` code and a ``status_auth_token``, prints
``{frontend}/dashboard/tokens/challenge?code=CODE`` and polls ``status`` every 5 s with the
status token as its bearer. A user signed in to the hub's web pages opens that link, compares the
code with their terminal's, and approves or denies. The next poll then gets a new token of the
approving user, encrypted to the CLI's key (RSA-OAEP, SHA-256 for both the hash and MGF1, no
label, base64), exactly once; the CLI decrypts it, saves it and calls ``/user/whoami``. A denied,
expired, unknown or already fetched challenge answers 404, which the CLI reports ("Challenge
expired") and stops on.

The state lives in the database (``db/challenges.py``), not in process memory: a hub may be
several processes behind one load balancer (docs/hub.md, "Deploying the hub"), and generate,
approve and poll can each land on a different one.

What bounds it, with no credential to charge it to: a challenge lives ``PRIME_HUB_LOGIN_TTL``
seconds (10 minutes); an address may have ``PER_CLIENT`` pending at once and the hub
``PENDING``; the body is capped (``edges/guard.py``). The code is 16 characters of a 32-letter
alphabet (80 bits, from ``secrets``): it is in the URL the user opens, so whoever could guess one
could approve it and log someone's CLI in to the wrong account. The new token never outranks or
outlives the approving session's token (scopes: the hub's default for a CLI token, ``read`` and
``publish``, among the approver's; its expiry), needs an approver allowed to mint tokens, and is
named ``prime login DATE`` so it shows in ``prime token list`` and can be revoked.
"""

from __future__ import annotations

import base64
import secrets
from datetime import timedelta
from typing import Any

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from hub_protocol.wire import Scope, TokenCreate
from hub_server.db.clock import now
from hub_server.db.rows import ChallengeRow
from hub_server.errors import HubError
from hub_server.services.auth import Principal
from hub_server.services.hub import Hub

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read off a terminal
CODE_LENGTH = 16
PER_CLIENT = 10
PENDING = 1000
MAX_KEY_PEM = 4096  # characters: a 4096-bit key's PEM is about 800
KEY_BITS = range(2048, 4097)
CLI_SCOPES: set[Scope] = set(TokenCreate().scopes)  # the hub's default for a CLI token


def new_code() -> str:
    """``XXXX-XXXX-XXXX-XXXX``: 80 random bits a person can compare with their terminal."""
    raw = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
    return "-".join(raw[i : i + 4] for i in range(0, CODE_LENGTH, 4))


def normalize_code(text: str) -> str:
    """A code as typed (any case, spaces or dashes anywhere) in its printed form, or ``""``."""
    raw = "".join(c for c in text[:64].upper() if c not in " -\t")
    if len(raw) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in raw):
        return ""
    return "-".join(raw[i : i + 4] for i in range(0, CODE_LENGTH, 4))


def public_key(pem: object) -> rsa.RSAPublicKey:
    """The CLI's public key: an RSA key of 2048 to 4096 bits in PEM (SubjectPublicKeyInfo)."""
    refused = HubError(
        400,
        "invalid_public_key",
        "encryptionPublicKey must be an RSA public key of 2048 to 4096 bits, PEM-encoded",
    )
    if not isinstance(pem, str) or len(pem) > MAX_KEY_PEM:
        raise refused
    try:
        key = serialization.load_pem_public_key(pem.encode())
    except (ValueError, TypeError, UnsupportedAlgorithm, UnicodeEncodeError):
        raise refused from None
    if not isinstance(key, rsa.RSAPublicKey) or key.key_size not in KEY_BITS:
        raise refused
    if not 3 <= key.public_numbers().e < 2**32:  # a huge exponent makes encrypting costly
        raise refused
    return key


def seal(pem: str, token: str) -> str:
    """``token`` encrypted to the CLI's key as it decrypts it (OAEP, SHA-256, MGF1-SHA-256)."""
    sealed = public_key(pem).encrypt(
        token.encode(),
        padding.OAEP(
            mgf=padding.MGF1(algorithm=hashes.SHA256()), algorithm=hashes.SHA256(), label=None
        ),
    )
    return base64.b64encode(sealed).decode()


def generate(hub: Hub, pem: object, client: str) -> dict[str, Any]:
    """A new challenge for the CLI that sent ``pem`` from ``client`` (its address)."""
    key = public_key(pem)
    code, status_token = new_code(), secrets.token_urlsafe(32)
    ttl = timedelta(seconds=hub.settings.login_ttl)
    expires_at = now(ttl)
    stored = key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    hub.logins.open(code, status_token, stored, client, expires_at, PER_CLIENT, PENDING)
    return {
        "challenge": code,
        "status_auth_token": status_token,
        "expires_at": expires_at,
        "expires_in": int(ttl.total_seconds()),
    }


def pending(hub: Hub, code: str) -> ChallengeRow | None:
    normalized = normalize_code(code)
    return hub.logins.pending(normalized) if normalized else None


def token_scopes(user: Principal) -> set[Scope]:
    """What the new token may do: the CLI default, among what the approver's token may."""
    return set(CLI_SCOPES) if "admin" in user.scopes else CLI_SCOPES & user.scopes


def approve(hub: Hub, user: Principal, code: str) -> bool:
    """``user`` (a signed-in session) approves ``code``; False if it is not pending."""
    user.require_account_change("approving a login (it creates a token)")
    normalized = normalize_code(code)
    return bool(normalized) and hub.logins.approve(
        normalized, user.token_id, token_scopes(user), user.expires_at
    )


def deny(hub: Hub, user: Principal, code: str) -> bool:
    normalized = normalize_code(code)
    return bool(normalized) and hub.logins.deny(normalized, user.token_id)


def status(hub: Hub, code: str, status_token: str | None) -> dict[str, Any]:
    """The CLI's poll: ``{"result": None}`` while pending, the sealed token once approved."""
    normalized = normalize_code(code)
    if not status_token or not normalized:
        raise _gone()
    name = f"prime login {now()[:16].replace('T', ' ')}"
    outcome, result = hub.logins.take(normalized, status_token, name, seal)
    if outcome == "pending":
        return {"status": "pending", "result": None}
    if outcome == "delivered":
        return {"status": "approved", "result": result}
    if outcome == "denied":
        raise HubError(404, "login_denied", "the login was denied in the browser: run it again")
    raise _gone()


def _gone() -> HubError:
    return HubError(
        404,
        "challenge_not_found",
        "no such login challenge: it expired, was already used, or was never made; run "
        "`prime login` again",
    )
