"""The hub under faults, on both backends, with real processes: a hub SIGKILLed at each moment of
a push shows the version whole or not at all, serves no blob of a version it does not show, takes
the retried push, and collects the orphan blobs at its next start; PostgreSQL restarted under a
load of pushes answers each with a success or a clean 503, and the retries succeed on the same
hub process (its pool reconnects)."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from support.hubs import error_code, make_wheel, open_hub, publish_raw

from hub_server.db.blob_references import referenced_blobs
from hub_server.db.blobs import BlobStore, open_blob_store
from hub_server.process import start_hub
from hub_server.services.hub import Hub
from verifiers.testing.processes import alive, descendants

pytestmark = pytest.mark.slow

PEP691 = {"Accept": "application/vnd.pypi.simple.v1+json"}
MOMENTS = ["body_streaming", "worker_checks", "blob_stored", "committed"]


def start_push(url: str, token: str, owner: str, name: str, wheel: tuple[str, bytes]):
    """A push's request over a raw socket, headers sent; (the socket, the body to send)."""
    body = (
        b'--b\r\nContent-Disposition: form-data; name="wheel"; filename="'
        + wheel[0].encode()
        + b'"\r\n\r\n'
        + wheel[1]
        + b"\r\n--b--\r\n"
    )
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)))
    sock.sendall(
        f"POST /api/v1/environments/{owner}/{name}/versions HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: multipart/form-data; boundary=b\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
    )
    return sock, body


def wait_for(condition, seconds: float, step: float = 0.005) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def blob_store(backend, data: Path) -> BlobStore:
    return open_blob_store(backend.blobs, data, backend.s3_endpoint)


def only_referenced_blobs_left(hub: Hub) -> bool:
    """Every blob in ``hub``'s store is one a committed row refers to."""
    return set(hub.blobs.keys_older_than(time.time() + 3600)) <= referenced_blobs(hub.database)


def what_is_shown(url: str, token: str, filename: str) -> dict[str, object]:
    """What every reader sees of sam/half-env 1.0.0: the API, the simple index, the download."""
    auth = {"Authorization": f"Bearer {token}"}
    api = httpx.get(f"{url}/api/v1/environments/sam/half-env/versions/1.0.0", headers=auth)
    index = httpx.get(f"{url}/simple/sam/half-env/half-env/", headers={**auth, **PEP691})
    listed = [f["filename"] for f in index.json()["files"]] if index.status_code == 200 else []
    download = httpx.get(f"{url}/files/sam/half-env/{filename}", headers=auth)
    metadata = httpx.get(f"{url}/files/sam/half-env/{filename}.metadata", headers=auth)
    return {
        "api": api.status_code,
        "listed": filename in listed,
        "download": download.status_code,
        "sha256": hashlib.sha256(download.content).hexdigest()
        if download.status_code == 200
        else None,
        "metadata": metadata.status_code,
    }


@pytest.mark.parametrize("moment", MOMENTS)
def test_a_hub_killed_mid_push_shows_the_version_whole_or_not_at_all_and_collects_its_orphans(
    tmp_path, fresh_backend, moment, monkeypatch
):
    data = tmp_path / "hub"
    token = fresh_backend.create_user(data, "sam")
    extra = [("half_env-1.0.0.dist-info/big.bin", os.urandom(1024 * 1024))]
    name, wheel = make_wheel("half-env", extra=extra)
    sha = hashlib.sha256(wheel).hexdigest()
    blobs = blob_store(fresh_backend, data)
    server = start_hub(data, backend=fresh_backend.flags)
    sock, body = start_push(server.url, token, "sam", "half-env", (name, wheel))
    if moment == "body_streaming":
        sock.sendall(body[: len(body) // 2])
        time.sleep(0.3)
    else:
        sock.sendall(body)
        if moment == "worker_checks":
            time.sleep(0.05)
        elif moment == "blob_stored":  # between storing the blobs and the commit, if caught
            assert wait_for(lambda: blobs.exists(sha), 30)
        else:
            assert wait_for(
                lambda: (
                    httpx.get(
                        f"{server.url}/api/v1/environments/sam/half-env/versions/1.0.0",
                        headers={"Authorization": f"Bearer {token}"},
                    ).status_code
                    == 200
                ),
                30,
            )
    workers = descendants(server.process.pid)
    server.kill()
    sock.close()
    assert wait_for(lambda: not any(alive(pid) for pid in workers), 10, 0.05)

    monkeypatch.setenv("PRIME_HUB_BLOB_GRACE", "0")  # the next start collects every orphan
    with start_hub(data, backend=fresh_backend.flags) as again:
        shown = what_is_shown(again.url, token, name)
        whole = {"api": 200, "listed": True, "download": 200, "sha256": sha, "metadata": 200}
        nothing = {"api": 404, "listed": False, "download": 404, "sha256": None, "metadata": 404}
        assert shown in (whole, nothing), shown
        if moment == "committed":
            assert shown == whole
        if moment == "body_streaming":
            assert shown == nothing
        store = open_hub(fresh_backend, data)
        try:  # every blob left is one a row refers to, once the start's collection ran
            assert wait_for(lambda: only_referenced_blobs_left(store), 15, 0.1)
        finally:
            store.close()
        assert blobs.exists(sha) == (shown == whole)

        retried = publish_raw({"url": again.url}, token, "sam", "half-env", (name, wheel))
        if shown == whole:
            assert retried.status_code == 409 and error_code(retried) == "version_exists"
        else:
            assert retried.status_code == 201, retried.text
        assert what_is_shown(again.url, token, name) == whole


def test_the_collector_removes_only_old_unreferenced_blobs(tmp_path, fresh_backend):
    """Referenced blobs stay whatever their age; an unreferenced one stays while younger than
    the grace period (a push may be about to commit its row), and goes once older; storing a
    blob again makes it young (a push reusing an orphan's bytes keeps them)."""
    from hub_server.services.blob_collection import collect_orphan_blobs

    data = tmp_path / "hub"
    token = fresh_backend.create_user(data, "ann")
    with start_hub(data, backend=fresh_backend.flags) as server:
        kept = make_wheel("kept-env")
        assert publish_raw({"url": server.url}, token, "ann", "kept-env", kept).status_code == 201
    hub = open_hub(fresh_backend, data)
    try:
        orphan = hub.blobs.put(b"bytes no row refers to")
        assert collect_orphan_blobs(hub, grace_s=3600) == []  # young: left alone
        # A store's times may be whole seconds (S3's LastModified, moto's too): the blob is
        # stored again 2 s later and judged by the clock as it was just before that, with 1.5 s
        # of grace. Stored again, it is young, however long the collector takes to look; not
        # stored again, it would be old. (Judged by the real clock, a write late in a second
        # read as a second old.)
        time.sleep(2.0)
        before = time.time()
        hub.blobs.put(b"bytes no row refers to")  # stored again: young again
        assert collect_orphan_blobs(hub, grace_s=1.5, clock=lambda: before) == []
        later = time.time() + 10  # once older than its grace, it goes
        assert collect_orphan_blobs(hub, grace_s=1.5, clock=lambda: later) == [orphan]
        assert not hub.blobs.exists(orphan)
        assert collect_orphan_blobs(hub, grace_s=0) == []  # the published wheel's blobs stay
        assert hub.blobs.exists(hashlib.sha256(kept[1]).hexdigest())
        assert only_referenced_blobs_left(hub)
    finally:
        hub.close()


def test_postgres_restarted_under_pushes_answers_cleanly_and_the_same_hub_takes_the_retries(
    tmp_path, hub_backend, request
):
    if hub_backend.name != "postgresql":
        pytest.skip("a PostgreSQL restart: the embedded backend has no server")
    from hub_server.testing import postgres_server

    _, s3 = request.getfixturevalue("_postgres_and_s3")
    with postgres_server() as pg:  # a server of this test's own, to restart
        db, bucket = pg.database(), s3.bucket_url()
        flags = ["--db", db, "--blobs", bucket, "--s3-endpoint", s3.url]
        data = tmp_path / "hub"
        setup = Hub(data, db=db, blobs=bucket, s3_endpoint=s3.url)
        token = setup.create_user("pat")
        setup.close()
        wheels = {f"1.{i}.0": make_wheel("load-env", f"1.{i}.0") for i in range(24)}
        answers: dict[str, list[tuple[int, str, float]]] = {v: [] for v in wheels}
        with start_hub(data, backend=flags) as server:
            hub = {"url": server.url}

            def push(version: str) -> None:
                started = time.monotonic()
                try:
                    resp = publish_raw(hub, token, "pat", "load-env", wheels[version])
                    answer = (resp.status_code, resp.text, time.monotonic() - started)
                except httpx.HTTPError as exc:  # a hang past the client's timeout, a reset
                    answer = (0, repr(exc), time.monotonic() - started)
                answers[version].append(answer)

            def pusher(versions: list[str]) -> None:
                for version in versions:
                    push(version)

            push("1.0.0")  # the upload workers up and connected: the restart cuts their pool
            assert answers["1.0.0"][0][0] == 201
            names = list(wheels)[1:]
            threads = [threading.Thread(target=pusher, args=(names[i::4],)) for i in range(4)]
            for thread in threads:
                thread.start()
            time.sleep(0.5)
            pg.restart(down_s=1.0)  # cuts the hub's and its workers' connections mid-push
            for thread in threads:
                thread.join(120)
            for version, tries in answers.items():
                status, text, took = tries[0]
                assert took < 30, (version, took)  # no push hangs on the dead server
                assert status in (201, 503), (version, status, text)
                if status == 503:
                    assert error_code(httpx.Response(503, text=text)) in (
                        "database_unavailable",
                        "upload_worker_failed",
                    ), text
                    assert "Traceback" not in text
            for version, tries in answers.items():  # the retries, on the same hub process
                if tries[0][0] != 201:
                    push(version)
                    status, text, _ = tries[-1]
                    assert status == 201 or (
                        status == 409
                        and error_code(httpx.Response(409, text=text)) == "version_exists"
                    ), (version, status, text)
            assert server.process.poll() is None
            shown = httpx.get(f"{server.url}/simple/pat/load-env/load-env/", headers=PEP691).json()
            assert sorted(shown["versions"]) == sorted(wheels)
            for version, (filename, wheel) in wheels.items():
                got = httpx.get(f"{server.url}/files/pat/load-env/{filename}")
                assert got.status_code == 200 and got.content == wheel, version
