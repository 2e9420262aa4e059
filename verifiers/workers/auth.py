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


SO_ATTACH_FILTER, SO_DETACH_FILTER = 26, 27  # Linux <asm-generic/socket.h>


def _drop_every_packet() -> tuple[Any, bytes]:
    """A classic BPF program of one instruction, ``ret #0`` (keep nothing), as the
    ``struct sock_fprog`` that ``SO_ATTACH_FILTER`` takes; the instructions are returned too, as
    the struct points at them."""
    import ctypes
    import struct

    code = ctypes.c_uint64(int.from_bytes(struct.pack("<HBBI", 0x06, 0, 0, 0), "little"))
    return code, struct.pack("HL", 1, ctypes.addressof(code))


class HandshakeThrottle:
    """Failed CurveZMQ handshakes on one listening socket, held to ``rate`` a second (after a
    first ``burst``). A guess of the secret fails inside libzmq (its HELLO does not decrypt),
    which tells the server only that a handshake failed, not whose: so the throttle is the
    listener's. Past the budget, new connections are paused for as long as the excess takes to
    drain (at most ``max_pause`` seconds): a filter on the listening socket drops incoming
    connection requests, which clients' kernels resend; connections already made, and their
    requests, are untouched. Unthrottled, a stranger tried ~1,500 secrets a second; a caller
    with the secret connecting after an attack waits at most ``max_pause`` (and TCP's resend)."""

    def __init__(
        self, listener: Any, *, rate: float = 2.0, burst: int = 10, max_pause: float = 5.0
    ) -> None:
        self.listener, self.rate, self.burst, self.max_pause = listener, rate, burst, max_pause
        self.tokens, self.last = float(burst), 0.0
        self.paused_until = 0.0
        self.failures, self.warned = 0, -60.0
        self._filter = _drop_every_packet()

    def failed(self, now: float) -> None:
        """One more handshake failed at ``now`` (monotonic seconds): pause when over budget."""
        self.failures += 1
        if self.last:
            self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now
        self.tokens = max(self.tokens - 1, -self.max_pause * self.rate)
        if self.tokens >= 0:
            return
        if not self.paused_until:
            if now - self.warned > 60:
                self.warned = now
                logger.warning(
                    "%d failed handshakes (a caller without the secret, or guessing it): new "
                    "connections are paused a while",
                    self.failures,
                )
            self.listener.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, self._filter[1])
        self.paused_until = now - self.tokens / self.rate

    def tick(self, now: float) -> None:
        """Let new connections in again once the pause is over."""
        if self.paused_until and now >= self.paused_until:
            self.listener.setsockopt(socket.SOL_SOCKET, SO_DETACH_FILTER, 0)
            self.paused_until = 0.0

    async def watch(self, monitor: Any) -> None:
        """Count the failures ``monitor`` (the listening ZMQ socket's) reports, until cancelled:
        a wrong server key (a guessed secret) or a client key the authenticator refused."""
        import time

        import zmq
        from zmq.utils.monitor import parse_monitor_message

        guesses = zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH
        while True:
            if await monitor.poll(200):
                event = parse_monitor_message(await monitor.recv_multipart())["event"]
                if event & guesses:
                    self.failed(time.monotonic())
            self.tick(time.monotonic())


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host:port``, for a ZMQ socket to accept from
    (``zmq.USE_FD``): the server keeps a handle on its listener, for :class:`HandshakeThrottle`."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(address)
    listener.listen(128)
    return listener
