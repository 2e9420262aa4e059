"""The hub's orphan blob collector, on both backends (SQLite with a files directory, PostgreSQL
with S3 through moto), against real hub processes: a push of bytes the collector is deleting
waits for the delete and keeps its blob (forced with a hook between the claim and the delete and a
clock that makes every blob old); a leased blob is never collected, a lease that outlived the
grace period is, and the push that held it is refused at its commit; a running hub collects
periodically, so what a deleted version or environment stored leaves the store (listed directly,
the directory or the bucket) while the hub keeps serving, and its name@version never comes back
with other bytes. Staged files (a staged push's, beside the blob store) are dropped together."""

from __future__ import annotations

import hashlib
import io
import threading
import time

import httpx
import pytest
from support.hubs import error_code, eval_files, make_wheel, open_hub, publish_raw, stored

from hub_server.errors import Unavailable
from hub_server.process import start_hub
from hub_server.services.blob_collection import collect_orphan_blobs

pytestmark = pytest.mark.slow


def wait_for(condition, seconds: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def ahead() -> float:
    """The collector's clock for the blobs' ages: two hours ahead, so every blob is old (as
    a push's rewrite landing the instant after the age check would be)."""
    return time.time() + 7200


def test_a_push_of_bytes_being_collected_waits_for_the_delete_and_keeps_its_blob(
    tmp_path, fresh_backend
):
    """The S3 race: the collector has decided a blob is an orphan (a killed push's wheel) and a
    retried push stores the same bytes and commits its row before the delete lands. With the
    claim committed first, the push's lease waits for the delete, then writes the bytes again."""
    data = tmp_path / "hub"
    token = fresh_backend.create_user(data, "sam")
    name, wheel = make_wheel("race-env")
    key = hashlib.sha256(wheel).hexdigest()
    hub = open_hub(fresh_backend, data)
    try:
        assert hub.blobs.put(wheel) == key  # what a push killed before its commit left
        with start_hub(data, backend=fresh_backend.flags) as server:
            warm = publish_raw(
                {"url": server.url}, token, "sam", "warm-env", make_wheel("warm-env")
            )
            assert (
                warm.status_code == 201
            )  # the upload workers up: a push now takes well under 10 s
            answers: list[httpx.Response] = []
            pushing = threading.Thread(
                target=lambda: answers.append(
                    publish_raw({"url": server.url}, token, "sam", "race-env", (name, wheel))
                )
            )
            during_claim: dict[str, object] = {}

            def between_claim_and_delete(claimed: str) -> None:
                assert claimed == key
                pushing.start()  # the retried push, on the real hub's upload worker
                pushing.join(10)  # without the claim, the push would be done (and lost) here
                during_claim["push_done"] = not pushing.is_alive()

            # attack: the push lands in the window between the collector's checks and its delete
            removed = collect_orphan_blobs(hub, on_claimed=between_claim_and_delete, clock=ahead)
            pushing.join(60)
            assert answers[0].status_code == 201, answers[0].text
            assert hub.blobs.exists(key) and key in stored(fresh_backend, data)  # not lost
            got = httpx.get(f"{server.url}/files/sam/race-env/{name}")
            assert got.status_code == 200 and got.content == wheel
            assert removed == [key]  # the orphan was deleted ...
            assert during_claim == {"push_done": False}  # ... while the push waited for it

            # legit: the collector, however old it judges the blobs, leaves the referenced ones
            assert collect_orphan_blobs(hub, grace_s=0, clock=ahead) == []
            assert httpx.get(f"{server.url}/files/sam/race-env/{name}").content == wheel
    finally:
        hub.close()


def test_a_collector_stalled_past_its_claims_ttl_deletes_nothing_a_push_took_over(
    tmp_path, fresh_backend
):
    """The collector claims an orphan, then stalls longer than a claim lives (``CLAIM_TTL``,
    forced by ageing its claim in the database): a push of the same bytes takes the claim over
    as a dead collector's, stores the blob and commits its row. The collector then resumes:
    it reads its claim again under the key's lock, finds it gone, and deletes nothing (it used
    to delete the blob the new row refers to, with every blob judged old)."""
    from hub_server.db.blob_leases import CLAIM_TTL

    data = tmp_path / "hub"
    token = fresh_backend.create_user(data, "kim")
    name, wheel = make_wheel("stall-env")
    key = hashlib.sha256(wheel).hexdigest()
    hub = open_hub(fresh_backend, data)
    try:
        assert hub.blobs.put(wheel) == key  # what a push killed before its commit left
        with start_hub(data, backend=fresh_backend.flags) as server:
            answers: list[httpx.Response] = []

            def stall_past_the_claims_ttl(claimed: str) -> None:
                with hub.database.transaction() as db:  # as if CLAIM_TTL went by
                    db.execute(
                        "UPDATE blob_claims SET claimed_at = claimed_at - ? WHERE key=?",
                        (CLAIM_TTL + 1, claimed),
                    )
                # attack: meanwhile a push of the same bytes lands and commits its row
                answers.append(
                    publish_raw({"url": server.url}, token, "kim", "stall-env", (name, wheel))
                )

            removed = collect_orphan_blobs(hub, on_claimed=stall_past_the_claims_ttl, clock=ahead)
            assert answers[0].status_code == 201, answers[0].text
            assert removed == [] and hub.blobs.exists(key) and key in stored(fresh_backend, data)
            got = httpx.get(f"{server.url}/files/kim/stall-env/{name}")
            assert got.status_code == 200 and got.content == wheel
            # legit: a collector that did not stall still removes a true orphan
            orphan = hub.blobs.put(b"an orphan nobody refers to")
            assert collect_orphan_blobs(hub, clock=ahead) == [orphan]
            assert hub.blobs.exists(key)
    finally:
        hub.close()


def test_a_leased_blob_is_never_collected_and_a_lease_past_the_grace_is(
    tmp_path, fresh_backend, monkeypatch
):
    """Between a push's write and its commit, its blob is leased: the collector leaves it,
    however old the blob. A push that dies leaves its lease; once the lease is older than the
    grace period the blob is collected, and a push that was only that slow is refused at its
    commit (503 ``blob_collected``: nothing half-published)."""
    monkeypatch.setenv("PRIME_HUB_BLOB_GRACE", "1")
    hub = open_hub(fresh_backend, tmp_path / "hub")
    try:
        data = b"bytes of a push in flight"
        key = hashlib.sha256(data).hexdigest()
        # attack: collect while the push holds its lease, with every blob judged old
        with hub.leased_blobs() as blobs:
            assert blobs.put(data) == key
            assert collect_orphan_blobs(hub, clock=ahead) == []
            assert hub.blobs.exists(key)
            with hub.database.transaction() as db:
                blobs.give_back(db)  # the commit of a row that refers to it (none here)
        # legit: the lease given back, nothing refers to the blob: it goes
        assert collect_orphan_blobs(hub, clock=ahead) == [key]
        assert key not in stored(fresh_backend, tmp_path / "hub")

        slow = hub.leased_blobs()
        slow.put(data)
        assert collect_orphan_blobs(hub, clock=ahead) == []  # its lease is live
        time.sleep(1.2)  # longer than the grace: presumed dead
        assert collect_orphan_blobs(hub, clock=ahead) == [key]
        with pytest.raises(Unavailable) as refused:
            with hub.database.transaction() as db:
                slow.give_back(db)
        assert refused.value.code == "blob_collected"
    finally:
        hub.close()


def test_a_running_hub_collects_what_deleted_versions_and_environments_stored(
    tmp_path, fresh_backend, monkeypatch
):
    """Delete a version, then the whole (private) environment with an eval attached: a hub that
    keeps running removes their blobs from the store (files directory or bucket) once they are
    past the grace period, keeps every blob a row still refers to, and never publishes the
    deleted name@version again, with other bytes or the same."""
    monkeypatch.setenv("PRIME_HUB_BLOB_GRACE", "1")
    monkeypatch.setenv("PRIME_HUB_BLOB_COLLECT_INTERVAL", "0.5")
    data = tmp_path / "hub"
    token = fresh_backend.create_user(data, "pat")
    auth = {"Authorization": f"Bearer {token}"}
    with start_hub(data, backend=fresh_backend.flags) as server:
        api = f"{server.url}/api/v1/environments/pat/gone-env"
        first, second = make_wheel("gone-env", "1.0.0"), make_wheel("gone-env", "1.1.0")
        blobs_of = {}  # each version's blobs: its wheel and the wheel's METADATA
        for built in (first, second):
            before = stored(fresh_backend, data)
            resp = httpx.post(
                f"{api}/versions",
                files={"wheel": built},
                data={"visibility": "private"},
                headers=auth,
                timeout=60,
            )
            assert resp.status_code == 201, resp.text
            blobs_of[built] = stored(fresh_backend, data) - before
            assert hashlib.sha256(built[1]).hexdigest() in blobs_of[built]
            assert len(blobs_of[built]) == 2
        version = httpx.get(f"{api}/versions/1.1.0", headers=auth).json()
        attached = httpx.post(
            f"{api}/versions/1.1.0/evals", files=eval_files(version, "run1", [0.5]), headers=auth
        )
        assert attached.status_code == 201, attached.text
        all_blobs = stored(fresh_backend, data)
        assert len(all_blobs) == 6  # two versions' wheels and METADATA, the eval's two files

        assert httpx.delete(f"{api}/versions/1.0.0", headers=auth).status_code == 204
        gone = blobs_of[first]
        assert wait_for(lambda: not gone & stored(fresh_backend, data), 20)
        assert stored(fresh_backend, data) == all_blobs - gone
        assert (
            httpx.get(f"{server.url}/files/pat/gone-env/{second[0]}", headers=auth).content
            == (second[1])
        )

        assert httpx.delete(api, headers=auth).status_code == 204
        assert wait_for(lambda: stored(fresh_backend, data) == set(), 20)
        assert server.process.poll() is None  # all of it while the hub kept running

        # immutability: the name re-registered, the retired numbers never resolve again
        other = make_wheel(
            "gone-env", "1.0.0", extra=[("gone_env-1.0.0.dist-info/other.txt", b"other bytes")]
        )
        again = publish_raw({"url": server.url}, token, "pat", "gone-env", other)
        assert again.status_code == 409 and error_code(again) == "version_exists"
        assert httpx.get(
            f"{server.url}/files/pat/gone-env/{first[0]}", headers=auth
        ).status_code == (404)
        fresh = publish_raw(
            {"url": server.url}, token, "pat", "gone-env", make_wheel("gone-env", "2.0.0")
        )
        assert fresh.status_code == 201, fresh.text


def test_staged_files_deleted_together_are_all_gone_and_the_rest_kept(
    tmp_path, fresh_backend, monkeypatch
):
    """Dropping a push's staged files is one call (one DeleteObjects request per thousand keys
    on S3, not one a file): every file named goes, across batches (two keys a batch here),
    one never stored is no error, and a file not named is kept."""
    from hub_server.db import blobs

    monkeypatch.setattr(blobs, "S3_DELETE_BATCH", 2)
    hub = open_hub(fresh_backend, tmp_path / "data")
    try:
        staged = [f"staged-file-{i:05d}" for i in range(5)]
        for staged_id in [*staged, "kept-staged-file"]:
            hub.staging.put(staged_id, io.BytesIO(staged_id.encode()))
        assert sorted(hub.staging.names()) == sorted([*staged, "kept-staged-file"])
        hub.staging.delete(*staged, "never-staged-file")
        assert hub.staging.names() == ["kept-staged-file"]
        with hub.staging.open("kept-staged-file") as kept:
            assert kept.read() == b"kept-staged-file"
        hub.staging.delete()  # nothing named: nothing asked of the store
        assert hub.staging.names() == ["kept-staged-file"]
    finally:
        hub.close()
