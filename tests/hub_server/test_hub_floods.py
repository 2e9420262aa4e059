"""What one anonymous peer, or one publisher, may hold of a hub before it authenticates or
publishes: a body's total time, connections per peer and in all, login challenges, staged pushes.
Each test attacks as SECURITY.md's attacker would, then checks the legitimate action still works
(on both storage backends)."""

from __future__ import annotations

import hashlib
import os
import resource
import socket
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from support.hubs import error_code, publish, user, wheel

from hub_server.edges.server import MAX_PER_PEER
from hub_server.errors import TooMany
from hub_server.process import start_hub
from hub_server.services.login import new_code
from hub_server.services.staging import MAX_OPEN_PUSHES, MAX_STAGED_BYTES
from hub_server.settings import MAX_FILE

pytestmark = pytest.mark.slow
GENERATE = "/api/v1/auth_challenge/generate"
PUSH = "/api/v1/environmentshub"
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
AS_ROOT = os.geteuid() == 0


@pytest.fixture(scope="module")
def hub(strict_hub):
    return strict_hub


@pytest.fixture(scope="module")
def pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def closed_by_hub(sock: socket.socket) -> bool:
    """Whether the hub closed ``sock`` (nothing to read yet means it is still held)."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def from_another_user(url: str) -> int:
    """``GET url``'s status from uid 65534: another local user, another peer."""
    code = f"import urllib.request as u; print(u.urlopen({url!r}, timeout=20).status)"
    done = subprocess.run(
        [*NOBODY, sys.executable, "-I", "-c", code], capture_output=True, text=True
    )
    return int(done.stdout or 0)


def test_a_body_trickled_never_stalling_is_cut_at_its_total_deadline(hub, pem):
    """The guard cut a body only after PRIME_HUB_READ_TIMEOUT (2 s here) of silence: an
    anonymous login request whose 16,000-byte body came a byte every 0.5 s lived as long as its
    sender liked (1,100 of them took every descriptor of the hub). Now a body must average
    MIN_BODY_RATE after the grace: 408, and the connection closes. A login still works."""
    head = (
        f"POST {GENERATE} HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
        "Content-Length: 16000\r\n\r\n"
    ).encode()
    with socket.create_connection(address(hub["url"]), timeout=0.2) as sock:
        sock.sendall(head)
        started, answer = time.monotonic(), b""
        while time.monotonic() - started < 15 and not answer:
            sock.sendall(b" ")
            try:
                answer = sock.recv(4096)
            except TimeoutError:
                pass
            time.sleep(0.5)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert time.monotonic() - started < 8  # 2 s of grace and a little: not 15
    login = httpx.post(hub["url"] + GENERATE, json={"encryptionPublicKey": pem})
    assert login.status_code == 200, login.text


def test_a_connection_the_hub_answered_is_closed_when_its_body_or_its_reader_stalls(hub):
    """Two connections the body deadline never saw lived for good: a route that reads no body
    (GET /health with a 10**12-byte Content-Length, a byte every 0.5 s; the answer went out, the
    rest kept coming) and a client that never reads a large answer (the hub's writes stalled).
    Each now has the read timeout (2 s here): the rest of a body after the answer, or a full
    write buffer to drain."""
    with socket.create_connection(address(hub["url"]), timeout=0.2) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: h\r\nContent-Length: 1000000000000\r\n\r\n")
        started, received, closed = time.monotonic(), b"", False
        while time.monotonic() - started < 15 and not closed:
            try:
                sock.sendall(b" ")
                chunk = sock.recv(4096)
                received += chunk
                closed = chunk == b""
            except TimeoutError:
                pass
            except OSError:
                closed = True
            time.sleep(0.5)
        assert received.startswith(b"HTTP/1.1 200"), received[:200]
        assert closed and time.monotonic() - started < 8

    name, token = user(hub)
    payload = os.urandom(6 << 20)  # incompressible: more than the kernel's buffers hold
    filename, body = wheel("big-answer", extra=[("big_answer/blob.bin", payload)])
    assert publish(hub, token, name, "big-answer", (filename, body)).status_code == 201
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(address(hub["url"]))
        sock.sendall(
            f"GET /files/{name}/big-answer/{filename} HTTP/1.1\r\nHost: h\r\n\r\n".encode()
        )
        time.sleep(6)  # reading nothing: the hub's write buffer fills and stays full
        sock.settimeout(10)
        got = 0
        while chunk := sock.recv(1 << 20):
            got += len(chunk)
        assert got < len(body)  # the hub closed it before the whole file went
    assert httpx.get(f"{hub['url']}/files/{name}/big-answer/{filename}").content == body


def test_one_peer_holds_at_most_its_share_of_connections(hub):
    """One local process opened as many connections as it liked (all of 127/8 is one machine):
    past MAX_PER_PEER the hub closes them as they arrive, from any 127/8 address of the same
    user; another local user, and this one once its connections end, are served."""
    with ExitStack() as held:
        socks = []
        for i in range(MAX_PER_PEER + 40):
            sock = held.enter_context(socket.socket())
            sock.bind((f"127.0.{20 + i // 200}.{1 + i % 200}", 0))
            sock.connect(address(hub["url"]))
            socks.append(sock)
        # the hub closes those past its share as it takes them; its share it holds (until the
        # 2 s header timeout, which would close them all: not what this counts)
        deadline = time.monotonic() + 60
        while (closed := sum(closed_by_hub(s) for s in socks)) < 40:
            assert time.monotonic() < deadline, closed
            time.sleep(0.05)
        assert closed < len(socks), closed
        if AS_ROOT:
            assert from_another_user(hub["url"] + "/health") == 200
    deadline = time.monotonic() + 10
    while httpx.get(hub["url"] + "/health").status_code != 200:  # the hub notices the closes
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_a_hub_short_of_descriptors_turns_connections_away_and_lives(tmp_path, fresh_backend):
    """A hub at its descriptor limit died or stopped answering (ECONNRESET on /health); it now
    closes new connections past what it has descriptors for, as they arrive, and serves again
    once they end. A hub with 300 descriptors (inherited from its parent) keeps ~54 of 150."""
    data = tmp_path / "hub"
    fresh_backend.create_user(data, "root", is_admin=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (300, hard))
    try:
        server = start_hub(data, backend=fresh_backend.flags)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    with server, ExitStack() as held:
        socks = [
            held.enter_context(socket.create_connection(address(server.url))) for _ in range(150)
        ]
        time.sleep(0.5)
        kept = len(socks) - sum(closed_by_hub(s) for s in socks)
        assert 0 < kept < 300 - 64, kept
        assert server.process.poll() is None
        held.close()
        deadline = time.monotonic() + 10
        while True:
            try:
                if httpx.get(server.url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_login_challenges_count_all_of_loopback_as_one_peer_and_never_lock_out_a_fresh_login(
    hub, pem
):
    """Each 127/8 address had its own 10 challenges: one process binding 100 of them filled the
    hub's 1,000 and refused every `prime login` for 10 minutes. All of 127/8 is now one peer per
    local user, and a hub at its cap drops the oldest challenge of the peer holding the most
    (if it holds more than one), so a fresh login from anyone else still gets one and a waiting
    one is never pushed out."""

    def generate(source: str) -> httpx.Response:
        transport = httpx.HTTPTransport(local_address=source)
        with httpx.Client(transport=transport) as client:
            return client.post(hub["url"] + GENERATE, json={"encryptionPublicKey": pem})

    existing = len(hub["backend"].query(hub["data"], "SELECT code_hash FROM login_challenges"))
    codes = [generate(f"127.0.9.{1 + i}").status_code for i in range(30)]
    assert codes.count(200) == 10 - existing, codes  # whatever address: one peer
    refused = generate("127.0.10.1")
    assert refused.status_code == 429 and error_code(refused) == "too_many_logins"

    store = hub["backend"].hub(hub["data"])
    try:  # the hub-wide cap, made small: a flood from one peer, then someone else's login
        total = len(hub["backend"].query(hub["data"], "SELECT code_hash FROM login_challenges"))
        flood = [new_code() for _ in range(12)]
        for code in flood:
            store.logins.open(code, uuid.uuid4().hex, pem, "203.0.113.7", "9999", 20, total + 12)
        fresh = new_code()
        store.logins.open(fresh, uuid.uuid4().hex, pem, "198.51.100.9", "9999", 10, total + 12)
        assert store.logins.pending(fresh) is not None
        assert store.logins.pending(flood[0]) is None  # the flood's oldest made room
        assert all(store.logins.pending(code) is not None for code in flood[1:])
        # a flood of one challenge from each of many peers (1,100 addresses pushed a waiting
        # user's out: every peer held one, and the oldest was the user's): a peer's only
        # challenge is never dropped, the newcomer is refused until they expire
        hub["backend"].execute(hub["data"], "DELETE FROM login_challenges")  # no peer holds 2
        total = 0
        waiting = new_code()
        store.logins.open(waiting, uuid.uuid4().hex, pem, "192.0.2.1", "9999", 10, total + 3)
        for peer in ("192.0.2.10", "192.0.2.11"):
            store.logins.open(new_code(), uuid.uuid4().hex, pem, peer, "9999", 10, total + 3)
        with pytest.raises(TooMany):
            store.logins.open(
                new_code(), uuid.uuid4().hex, pem, "192.0.2.12", "9999", 10, total + 3
            )
        assert store.logins.pending(waiting) is not None
    finally:
        store.close()
    if AS_ROOT:  # another local user is another peer: its login is taken
        code = (
            "import json, urllib.request as u; r = u.Request("
            f"{hub['url'] + GENERATE!r}, json.dumps({{'encryptionPublicKey': {pem!r}}}).encode(), "
            "{'Content-Type': 'application/json'}); print(u.urlopen(r, timeout=20).status)"
        )
        done = subprocess.run([*NOBODY, sys.executable, "-I", "-c", code], capture_output=True)
        assert done.stdout.strip() == b"200", done.stderr[-500:]


def declare(hub, token: str, push: str, kind: str, size: int) -> httpx.Response:
    wheel = kind == "wheel"
    route, suffix = ("wheels", "-0.1.0-py3-none-any.whl") if wheel else ("versions", ".tar.gz")
    body = {"filename": f"q_env{suffix}", "sha256": hashlib.sha256(b"x").hexdigest(), "size": size}
    auth = {"Authorization": f"Bearer {token}"}
    return httpx.post(f"{hub['url']}{PUSH}/{push}/{route}", json=body, headers=auth)


def resolve(hub, token: str) -> httpx.Response:
    return httpx.post(
        f"{hub['url']}{PUSH}/resolve",
        json={"name": "q-" + uuid.uuid4().hex[:8]},
        headers={"Authorization": f"Bearer {token}"},
    )


def test_a_publisher_holds_bounded_staged_pushes_and_bytes(hub):
    """A publish token opened staged pushes at the rate of its requests (40 accepted, 100 MiB
    each, kept 30 minutes): now at most MAX_OPEN_PUSHES open and MAX_STAGED_BYTES declared
    across them per user, each refusal a 429 saying what to do. A published or expired push
    stops counting; replacing a declared file and another user's push are unaffected."""
    _, token = user(hub, "stager")
    pushes = [resolve(hub, token) for _ in range(MAX_OPEN_PUSHES)]
    assert all(p.status_code == 200 for p in pushes), pushes[-1].text
    over = resolve(hub, token)
    assert over.status_code == 429 and error_code(over) == "too_many_open_pushes"
    assert "limit" in over.json()["error"]["message"]

    ids = [p.json()["data"]["id"] for p in pushes]
    for size in (0, -1):  # was a 413 saying the file was over 50 MiB
        bad = declare(hub, token, ids[0], "wheel", size)
        assert bad.status_code == 400 and error_code(bad) == "invalid_size", bad.text
    huge = declare(hub, token, ids[0], "wheel", MAX_FILE + 1)
    assert huge.status_code == 413 and error_code(huge) == "file_too_large"
    files = MAX_STAGED_BYTES // MAX_FILE
    for i in range(files):
        staged = declare(hub, token, ids[i // 2], ("wheel", "source")[i % 2], MAX_FILE)
        assert staged.status_code == 200, staged.text
    too_much = declare(hub, token, ids[files // 2], "wheel", 1)
    assert too_much.status_code == 429 and error_code(too_much) == "too_much_staged"
    assert declare(hub, token, ids[0], "wheel", 1024).status_code == 200  # replaces its own

    # a published push (forget() marks it) and an abandoned one, once expired, stop counting
    hub["backend"].execute(
        hub["data"], "UPDATE staged_pushes SET published='0.1.0' WHERE id=?", (ids[-1],)
    )
    assert resolve(hub, token).status_code == 200
    hub["backend"].execute(
        hub["data"], "UPDATE staged_pushes SET expires_at='2000-01-01' WHERE id=?", (ids[0],)
    )
    again = resolve(hub, token)
    assert again.status_code == 200, again.text
    assert declare(hub, token, again.json()["data"]["id"], "wheel", MAX_FILE).status_code == 200

    _, other = user(hub, "stager")
    theirs = resolve(hub, other)
    assert theirs.status_code == 200
    assert declare(hub, other, theirs.json()["data"]["id"], "wheel", MAX_FILE).status_code == 200


class TrickledPush:
    """A native push of a declared 50 MiB wheel whose body comes 64 KiB every 0.25 s (256
    KiB/s: never stalled, far above the total deadline's rate), until ``stop()``."""

    def __init__(self, hub, token: str, owner: str, name: str) -> None:
        import threading

        parts = httpx.URL(hub["url"])
        self.sock = socket.create_connection((parts.host, parts.port), timeout=5)
        self.answer = b""
        self._stopped = threading.Event()
        filename = f"{name.replace('-', '_')}-1.0.0-py3-none-any.whl"
        self.sock.sendall(
            f"POST /api/v1/environments/{owner}/{name}/versions HTTP/1.1\r\nHost: hub\r\n"
            f"Authorization: Bearer {token}\r\nContent-Length: {MAX_FILE}\r\n"
            "Content-Type: multipart/form-data; boundary=b\r\n\r\n--b\r\n"
            f'Content-Disposition: form-data; name="wheel"; filename="{filename}"\r\n\r\n'.encode()
        )
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        self.sock.setblocking(False)
        while not self._stopped.wait(0.25):
            try:
                self.sock.send(b"x" * 65536)  # what fits: a push not yet admitted is not read
            except BlockingIOError:
                pass
            except OSError:
                return
            try:
                self.answer += self.sock.recv(4096)
            except BlockingIOError:
                pass
            except OSError:
                return

    def stop(self) -> None:
        self._stopped.set()
        self.thread.join(10)
        self.sock.close()


def test_one_publishers_slow_uploads_never_keep_another_users_push_waiting(hub):
    """Uploads are read as many at once as the hub has upload workers (2). One publish token
    opened two native pushes whose 50 MiB bodies came slowly but steadily (an hour each at the
    rate the total deadline allows): both were admitted, and every other user's push, eval and
    dataset waited until they ended (a push of alice's was still waiting after 60 s). Now one
    user holds all slots but one: alice publishes while both of bob's bodies still come, and
    bob's own push is admitted once his slow ones are gone."""
    bob, bob_token = user(hub, "slowbob")
    alice, alice_token = user(hub, "alice")
    slow = [TrickledPush(hub, bob_token, bob, f"slow-{i}") for i in range(2)]
    try:
        time.sleep(1)  # both bodies are coming
        made = publish(hub, alice_token, alice, "while-bob-trickles", wheel("while-bob-trickles"))
        assert made.status_code == 201, made.text
        assert [push.answer for push in slow] == [b"", b""]  # bob's uploads still going
    finally:
        for push in slow:
            push.stop()
    mine = publish(hub, bob_token, bob, "bob-after", wheel("bob-after"))
    assert mine.status_code == 201, mine.text
