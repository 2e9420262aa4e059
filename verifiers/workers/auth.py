"""The env server's lock: CurveZMQ keys derived from one shared secret.

Both sides derive the same two Curve25519 key pairs from the secret (SHA-256 of a label and the
secret is the private key): the server's, which clients must know to connect at all, and the one
client key the server's authenticator admits. Every connection is then encrypted and
authenticated, and a caller without the secret cannot complete the handshake: it is refused
before it can send a request. The secret itself never crosses the wire.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import socket
from pathlib import Path
from typing import Any

from verifiers.processes.credential_file import checked_secret, read_credential
from verifiers.processes.open_files import ACCEPT_BURST

logger = logging.getLogger("verifiers.workers.auth")
SECRET_ENV = "VF_ENV_SECRET"
DEFAULT_SECRET_FILE = Path.home() / ".cache" / "verifiers" / "env-server.secret"


def _keypair(secret: str, label: bytes) -> tuple[bytes, bytes]:
    import zmq
    import zmq.utils.z85

    private = zmq.utils.z85.encode(hashlib.sha256(label + secret.encode()).digest())
    return zmq.curve_public(private), private


def server_keys(secret: str) -> tuple[bytes, bytes]:
    return _keypair(secret, b"vf-env-server:")


def client_keys(secret: str) -> tuple[bytes, bytes]:
    return _keypair(secret, b"vf-env-client:")


def load_secret(path: str | Path | None = None, *, create: bool = False) -> str | None:
    """The secret from ``path``, else ``$VF_ENV_SECRET``, else the default file (made, 0600,
    when ``create``). A file must be this user's and private, a secret at least
    ``MIN_SECRET_CHARS`` long (``CredentialError`` otherwise)."""
    if path is not None:
        return read_credential(path)
    if os.environ.get(SECRET_ENV) is not None and os.environ[SECRET_ENV] != "":
        return checked_secret(os.environ[SECRET_ENV], f"${SECRET_ENV}")
    if DEFAULT_SECRET_FILE.exists() or DEFAULT_SECRET_FILE.is_symlink():
        return read_credential(DEFAULT_SECRET_FILE)
    if not create:
        return None
    DEFAULT_SECRET_FILE.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(32)
    fd = os.open(DEFAULT_SECRET_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(value + "\n")
    return value


def secure_server(socket: Any, context: Any, secret: str) -> Any:
    """Make ``socket`` a CURVE server admitting only the secret's client key; returns the
    authenticator (stop it when the socket closes)."""
    import zmq
    from zmq.auth.asyncio import AsyncioAuthenticator

    public, private = server_keys(secret)
    allowed, _ = client_keys(secret)

    class OnlyTheSecret:
        def callback(self, domain: str, key: bytes) -> bool:
            return key == zmq.utils.z85.decode(allowed) or key == allowed

    auth = AsyncioAuthenticator(context)
    auth.start()
    auth.configure_curve_callback(domain="*", credentials_provider=OnlyTheSecret())
    socket.curve_secretkey = private
    socket.curve_publickey = public
    socket.curve_server = True
    return auth


def secure_client(socket: Any, secret: str) -> None:
    public, private = client_keys(secret)
    socket.curve_secretkey = private
    socket.curve_publickey = public
    socket.curve_serverkey = server_keys(secret)[0]


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port``, for the server's gate (``gate.Gate``) to accept
    from: the gate, not libzmq, sees every peer's address."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(address)
    listener.listen(ACCEPT_BURST)
    return listener
