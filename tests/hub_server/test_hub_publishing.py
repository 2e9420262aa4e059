"""What a push must be and what it does to the store: scopes and namespaces, immutable versions,
archives that lie refused, concurrent pushes across hub processes, a server killed mid-upload,
uploads checked in worker processes that yield to reads."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import stat
import tarfile
import time
import uuid
import zipfile
from pathlib import Path

import httpx
import pytest
from support.hubs import error_code, make_wheel, new_user, publish_raw

from hub_client.client import HubAPIError, HubClient
from hub_server.process import start_hub
from verifiers.testing.processes import alive, descendants, parent_of


def test_publishing_requires_a_token_with_publish_scope_in_your_namespace(hub, tmp_path):
    dave = new_user(hub, "dave")
    read_only = HubClient(hub["url"], dave).create_token("ro", ["read"]).token
    eve = new_user(hub, "eve")
    wheel = make_wheel("dave-env")
    assert (
        r := publish_raw(hub, None, "dave", "dave-env", wheel)
    ).status_code == 401 and error_code(r) == "auth_required"
    assert (
        r := publish_raw(hub, "vfh_forged", "dave", "dave-env", wheel)
    ).status_code == 401 and error_code(r) == "invalid_token"
    assert (
        r := publish_raw(hub, read_only, "dave", "dave-env", wheel)
    ).status_code == 403 and error_code(r) == "insufficient_scope"
    assert (
        r := publish_raw(hub, eve, "dave", "dave-env", wheel)
    ).status_code == 403 and error_code(r) == "not_owner"
    assert publish_raw(hub, dave, "dave", "dave-env", wheel).status_code == 201
    with pytest.raises(HubAPIError) as excinfo:
        HubClient(hub["url"], read_only).create_token("escalate", ["publish"])
    assert excinfo.value.code == "insufficient_scope"


def test_published_versions_and_files_are_never_replaced(hub):
    frank = new_user(hub, "frank")
    original = make_wheel("frank-env")  # zip timestamps: build once, compare against these bytes
    assert publish_raw(hub, frank, "frank", "frank-env", original).status_code == 201
    changed = make_wheel("frank-env", extra=[("frank_env-1.0.0.dist-info/NOTICE", b"x = 1")])
    resp = publish_raw(hub, frank, "frank", "frank-env", changed)
    assert resp.status_code == 409 and error_code(resp) == "version_exists"
    files = HubClient(hub["url"]).version("frank", "frank-env", "1.0.0").files
    assert len(files) == 1 and files[0].sha256 == hashlib.sha256(original[1]).hexdigest()


def symlink_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


def tar_with(members: list[tuple[tarfile.TarInfo, bytes]], root="bad_env-1.0.0") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo(f"{root}/PKG-INFO")
        data = b"Metadata-Version: 2.1\nName: bad-env\nVersion: 1.0.0\n"
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for member, content in members:
            member.size = len(content) if member.isfile() else 0
            tar.addfile(member, io.BytesIO(content) if member.isfile() else None)
    return buf.getvalue()


def tar_member(name: str, kind: bytes = tarfile.REGTYPE, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


@pytest.mark.parametrize(
    ("wheel", "sdist", "code"),
    [
        (make_wheel("bad-env", meta_name="requests"), None, "metadata_mismatch"),
        (make_wheel("bad-env", extra=[("../../escape.py", b"x")]), None, "unsafe_path"),
        (make_wheel("bad-env", extra=[("/abs/path.py", b"x")]), None, "unsafe_path"),
        (
            make_wheel("bad-env", extra=[(symlink_info("bad_env_link"), b"/etc/passwd")]),
            None,
            "unsafe_member",
        ),
        (
            make_wheel("bad-env", extra=[("bomb.bin", b"\0" * (40 * 1024 * 1024))]),
            None,
            "compression_ratio",
        ),
        (("bad_env-1.0.0-py3-none-any.whl", b"not a zip"), None, "invalid_archive"),
        (
            make_wheel("bad-env"),
            ("bad_env-1.0.0.tar.gz", tar_with([(tar_member("bad_env-1.0.0/../../x"), b"x")])),
            "unsafe_path",
        ),
        (
            make_wheel("bad-env"),
            (
                "bad_env-1.0.0.tar.gz",
                tar_with([(tar_member("bad_env-1.0.0/link", tarfile.SYMTYPE, "/etc/shadow"), b"")]),
            ),
            "unsafe_member",
        ),
        (
            make_wheel("bad-env"),
            (
                "bad_env-1.0.0.tar.gz",
                tar_with([(tar_member("bad_env-1.0.0/hard", tarfile.LNKTYPE, "/etc/shadow"), b"")]),
            ),
            "unsafe_member",
        ),
        (
            make_wheel("bad-env", version="2.0.0"),
            ("bad_env-1.0.0.tar.gz", tar_with([])),
            "metadata_mismatch",
        ),
        (("bad_env-9.9.9-py3-none-any.whl", make_wheel("bad-env")[1]), None, "metadata_mismatch"),
    ],
    ids=[
        "other-package",
        "dotdot",
        "absolute",
        "symlink",
        "zip-bomb",
        "not-zip",
        "sdist-dotdot",
        "sdist-symlink",
        "sdist-hardlink",
        "sdist-version",
        "filename-version",
    ],
)
def test_unsafe_or_lying_archives_are_rejected(hub, wheel, sdist, code):
    token = new_user(hub, f"u{uuid.uuid4().hex[:12]}")
    owner = HubClient(hub["url"], token).me().user
    resp = publish_raw(hub, token, owner, "bad-env", wheel, sdist)
    assert resp.status_code == 400 and error_code(resp) == code, resp.text
    with pytest.raises(HubAPIError):
        HubClient(hub["url"]).environment(owner, "bad-env")  # nothing half-published


def test_an_sdist_whose_pkg_info_is_a_directory_is_refused_with_a_code():
    from hub_protocol.archives import UnsafeArchiveError, inspect_sdist

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.addfile(tar_member("bad_env-1.0.0/PKG-INFO", tarfile.DIRTYPE))
    with pytest.raises(UnsafeArchiveError) as excinfo:
        inspect_sdist(buf.getvalue())
    assert excinfo.value.code == "invalid_metadata"


def test_teams_share_a_namespace(hub):
    ivy, jon, kim = new_user(hub, "ivy"), new_user(hub, "jon"), new_user(hub, "kim")
    HubClient(hub["url"], ivy).create_team("lab")
    HubClient(hub["url"], ivy).add_team_member("lab", "jon")
    assert publish_raw(hub, jon, "lab", "lab-env", make_wheel("lab-env")).status_code == 201
    assert (
        error_code(publish_raw(hub, kim, "lab", "lab-env", make_wheel("lab-env", "2.0.0")))
        == "not_owner"
    )
    with pytest.raises(HubAPIError) as excinfo:
        HubClient(hub["url"], kim).add_team_member("lab", "kim")
    assert excinfo.value.code == "not_team_owner"


def test_two_owners_same_distribution_do_not_silently_overwrite(hub, tmp_path):
    from hub_client.install import EnvSpec, InstallError, LockEntry, install, write_lock

    olga, pat = new_user(hub, "olga"), new_user(hub, "pat")
    assert (
        publish_raw(hub, olga, "olga", "shared-name", make_wheel("shared-name")).status_code == 201
    )
    assert publish_raw(hub, pat, "pat", "shared-name", make_wheel("shared-name")).status_code == 201
    lock = tmp_path / "environments.lock"
    write_lock(
        lock,
        [
            LockEntry(
                "olga",
                "shared-name",
                "1.0.0",
                "shared-name",
                "shared_name-1.0.0-py3-none-any.whl",
                "x",
            )
        ],
    )
    with pytest.raises(
        InstallError, match="olga/shared-name both install the distribution 'shared-name'"
    ):
        install(HubClient(hub["url"], pat), [EnvSpec.parse("pat/shared-name")], lock)


def test_concurrent_pushes_across_two_hub_processes_leave_one_consistent_store(hub):
    """Two hub processes on one store: 20 pushes of different versions and 20 of one version,
    alternating between them; each process's index shows the other's publishes at once."""
    from concurrent.futures import ThreadPoolExecutor

    rita = new_user(hub, "rita")
    with start_hub(hub["data"], backend=hub["backend"].flags) as second:
        hubs = [hub, {"url": second.url}]
        index = "/simple/rita/busy-env/busy-env/"
        accept = {"Accept": "application/vnd.pypi.simple.v1+json"}
        with ThreadPoolExecutor(20) as pool:
            different = list(
                pool.map(
                    lambda i: (
                        publish_raw(
                            hubs[i % 2],
                            rita,
                            "rita",
                            "busy-env",
                            make_wheel("busy-env", f"1.0.{i}"),
                        ).status_code
                    ),
                    range(20),
                )
            )
            seen = httpx.get(second.url + index, headers=accept).json()["versions"]
            same = list(
                pool.map(
                    lambda i: publish_raw(
                        hubs[i % 2],
                        rita,
                        "rita",
                        "busy-env",
                        make_wheel(
                            "busy-env", "3.0.0", extra=[(f"busy_env-3.0.0.dist-info/f{i}", b"x")]
                        ),
                    ),
                    range(20),
                )
            )
        assert different == [201] * 20 and len(seen) == 20
        winners = [r for r in same if r.status_code == 201]
        assert len(winners) == 1 and all(
            error_code(r) in ("version_exists", "file_exists") for r in same if r.status_code != 201
        )
        for url in (hub["url"], second.url):  # both processes tell the same story
            versions = HubClient(url).versions("rita", "busy-env")
            assert len(versions) == 21 and all(len(v.files) == 1 for v in versions)
            stored = next(v for v in versions if v.version == "3.0.0").files[0].sha256
            assert stored == winners[0].json()["files"][0]["sha256"]
            assert "3.0.0" in httpx.get(url + index, headers=accept).json()["versions"]


def test_killing_the_server_mid_upload_leaves_no_partial_version(tmp_path, fresh_backend):
    import socket

    data = tmp_path / "hub"
    token = fresh_backend.create_user(data, "sam")
    server = start_hub(data, backend=fresh_backend.flags)
    port = int(server.url.rsplit(":", 1)[1])
    big = ("half_env-1.0.0.dist-info/big.bin", os.urandom(4 * 1024 * 1024))
    name, wheel = make_wheel("half-env", extra=[big])
    body = (
        b'--b\r\nContent-Disposition: form-data; name="wheel"; filename="'
        + name.encode()
        + b'"\r\n\r\n'
        + wheel
        + b"\r\n--b--\r\n"
    )
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        f"POST /api/v1/environments/sam/half-env/versions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    )
    sock.sendall(body[: len(body) // 2])  # half the upload, then the server dies
    deadline = time.monotonic() + 60
    # the upload workers (with the fork server and resource tracker)
    while len(workers := descendants(server.process.pid)) < 2:
        assert time.monotonic() < deadline, workers
        time.sleep(0.05)
    server.kill()
    sock.close()
    deadline = time.monotonic() + 10  # nothing of the hub's outlives it, holding the store open
    while (left := [pid for pid in workers if alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, [Path(f"/proc/{pid}/cmdline").read_bytes()[:120] for pid in left]
    with start_hub(data, port=port, backend=fresh_backend.flags) as again:
        resp = httpx.get(
            f"{again.url}/api/v1/environments/sam/half-env/versions/1.0.0",
            headers={"Authorization": f"Bearer {token}"},
        )
        assert resp.status_code == 404
        assert (
            publish_raw({"url": again.url}, token, "sam", "half-env", (name, wheel)).status_code
            == 201
        )


async def test_uploads_work_in_processes_that_yield_the_cpu_to_reads(tmp_path):
    """What the docs say of uploads: their work runs in worker processes of the hub's (its
    own interpreter lock, so pure-Python checks never take the loop's turn), at a lower CPU
    priority than the loop that answers reads; an error comes back whole."""
    from hub_server.background.upload_pool import UPLOAD_NICENESS, worker_identity
    from hub_server.errors import HubError
    from hub_server.services.hub import Hub

    hub = Hub(tmp_path)
    try:
        pid, parent, nice = await hub.upload_work(worker_identity)
        # a child of the hub's fork server, which is the hub's child
        assert pid != os.getpid() and parent_of(parent) == os.getpid()
        assert nice == min(19, os.getpriority(os.PRIO_PROCESS, 0) + UPLOAD_NICENESS)
        with pytest.raises(HubError) as refused:
            await hub.upload_work(refuse_in_worker)
        assert (refused.value.status, refused.value.code) == (409, "version_exists")
    finally:
        hub.close()


def refuse_in_worker(hub) -> None:
    from hub_server.errors import HubError

    raise HubError(409, "version_exists", "refused in the worker")


async def test_a_dead_upload_worker_is_a_503_and_the_next_upload_gets_fresh_workers(tmp_path):
    """A worker killed mid-upload (the OOM killer, an operator's kill) answers that upload with
    503 ``upload_worker_failed``; the hub stays up and the next upload runs in new workers."""
    from hub_server.background.upload_pool import worker_identity
    from hub_server.errors import HubError
    from hub_server.services.hub import Hub

    hub = Hub(tmp_path)
    try:
        first, _, _ = await hub.upload_work(worker_identity)
        with pytest.raises(HubError) as died:
            await hub.upload_work(die_in_worker)
        assert (died.value.status, died.value.code) == (503, "upload_worker_failed")
        again, parent, _ = await hub.upload_work(worker_identity)
        assert parent_of(parent) == os.getpid() and again != first
    finally:
        hub.close()


def die_in_worker(hub) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


async def test_uploads_are_admitted_as_many_at_once_as_there_are_workers(tmp_path):
    """A third push waits (before its body is read) while two are in the hub's hands; one
    user holds all slots but one, so another user's push is admitted beside their one, their
    own second one waits, and a waiter cancelled leaves no slot taken."""
    import asyncio

    from hub_server.services.hub import Hub

    hub = Hub(tmp_path, upload_workers=2)
    admitted: list[str] = []

    async def push(user: int, name: str) -> None:
        async with hub.upload_slot(user):
            admitted.append(name)
            await asyncio.sleep(3600)

    async def settle() -> None:
        for _ in range(5):
            await asyncio.sleep(0)

    try:
        tasks = {
            name: asyncio.create_task(push(user, name)) for user, name in [(1, "a1"), (1, "a2")]
        }
        await settle()
        assert admitted == ["a1"]  # a2 waits: user 1 holds all it may
        tasks["b1"] = asyncio.create_task(push(2, "b1"))
        tasks["c1"] = asyncio.create_task(push(3, "c1"))
        await settle()
        assert admitted == ["a1", "b1"]  # c1 waits: both slots are held
        tasks["c1"].cancel()
        await settle()
        tasks["b1"].cancel()
        await settle()
        assert admitted == ["a1", "b1"]  # c1 left; a2 still waits on its own first push
        tasks["a1"].cancel()
        await settle()
        assert admitted == ["a1", "b1", "a2"]
        tasks["d1"] = asyncio.create_task(push(4, "d1"))
        await settle()
        assert admitted[-1] == "d1"
    finally:
        for task in tasks.values():
            task.cancel()
        hub.close()


async def test_a_large_upload_reaches_its_worker_through_the_spool_and_leaves_nothing(
    tmp_path, left_by_the_dead
):
    """An upload spooled to disk (over the parser's in-memory size) is copied for the worker,
    read there whole, and the copy and its directory are gone after the work and the hub; the
    spool of a hub killed outright (SIGKILL) goes when the next hub process spools."""
    import hashlib
    import tempfile

    from hub_server.background.upload_pool import Upload
    from hub_server.services.hub import Hub

    payload = os.urandom(4096)
    spooled = tempfile.SpooledTemporaryFile(max_size=1024)
    spooled.write(payload)
    assert spooled._rolled  # on disk, as the parser leaves a large file
    left = tmp_path / "upload-spool" / left_by_the_dead("")
    another_host = tmp_path / "upload-spool" / left_by_the_dead("", elsewhere=True)
    for directory in (left, another_host):  # a container sharing the data dir has its own pids
        directory.mkdir(parents=True)
        (directory / "upload").write_bytes(payload)
    hub = Hub(tmp_path)
    try:
        digest = await hub.upload_work(digest_in_worker, Upload("big.whl", spooled))
        assert digest == hashlib.sha256(payload).hexdigest()
        assert list((tmp_path / "upload-spool").glob("*/*")) == [another_host / "upload"]
    finally:
        hub.close()
    assert list((tmp_path / "upload-spool").iterdir()) == [another_host]


def digest_in_worker(hub, upload) -> str:
    import hashlib

    return hashlib.sha256(upload.file.read()).hexdigest()
