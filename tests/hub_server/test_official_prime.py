"""Prime Intellect's official ``prime`` CLI (``prime==0.18.0`` from PyPI, unchanged, in a venv of
its own) against ``prime hub serve``, on both storage backends: each workflow step is run as a
user types it and judged by its effect (the hub's own API, files on disk, an import in a fresh
venv)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.hubs import new_user, serving
from support.hubs import prime as native_prime

from hub_server.db.blobs import StagingArea
from hub_server.services.staging import INLINE_MAX
from hub_server.testing import BackendUnavailable, official_prime_venv
from hub_server.testing import OfficialPrime as Official

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def official(tmp_path_factory) -> Path:
    """A venv holding the official CLI; the module is skipped where PyPI cannot be reached."""
    try:
        return official_prime_venv(tmp_path_factory.mktemp("official-prime"))
    except BackendUnavailable as exc:
        pytest.skip(str(exc))


URL_TTL = 20  # seconds an upload URL lives on this module's hubs (a staged push: twice that)
LOGIN_TTL = 15  # seconds a `prime login` waits for its approval on this module's hubs


@pytest.fixture(scope="module")
def hub(tmp_path_factory, hub_backend):
    settings = {"PRIME_HUB_UPLOAD_URL_TTL": str(URL_TTL), "PRIME_HUB_LOGIN_TTL": str(LOGIN_TTL)}
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)  # read by the hub process it starts
    try:
        with serving(tmp_path_factory, hub_backend) as running:
            yield running
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def package(name: str, version: str, body: str) -> tuple[tuple[str, bytes], tuple[str, bytes]]:
    """A wheel and an sdist with no dependencies (the install resolves nothing from PyPI)."""
    dist = name.replace("-", "_")
    files = {
        f"{dist}/__init__.py": body.encode(),
        f"{dist}-{version}.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: s\n"
        ).encode(),
        f"{dist}-{version}.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{path},,\n" for path in files) + f"{dist}-{version}.dist-info/RECORD,,\n"
    files[f"{dist}-{version}.dist-info/RECORD"] = record.encode()
    wheel = io.BytesIO()
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    sdist = io.BytesIO()
    with tarfile.open(fileobj=sdist, mode="w:gz") as tar:
        for path, data in (
            ("PKG-INFO", files[f"{dist}-{version}.dist-info/METADATA"]),
            ("pyproject.toml", f"[project]\nname = '{name}'\nversion = '{version}'\n".encode()),
            (f"{dist}/__init__.py", body.encode()),
        ):
            info = tarfile.TarInfo(f"{dist}-{version}/{path}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return (f"{dist}-{version}-py3-none-any.whl", wheel.getvalue()), (
        f"{dist}-{version}.tar.gz",
        sdist.getvalue(),
    )


def publish(hub, token, owner, name, version, body, **form) -> dict:
    wheel, sdist = package(name, version, body)
    resp = httpx.post(
        f"{hub['url']}/api/v1/environments/{owner}/{name}/versions",
        files={"wheel": wheel, "sdist": sdist},
        data={"description": "adds numbers", "tags": '["math"]', **form},
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,
    )
    assert resp.status_code == 201, resp.text
    return resp.json()


def native(hub, path: str, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{hub['url']}/api/v1/environments/{path}", headers=headers, timeout=30)


def test_reads_install_pull_and_deletes(official, hub, tmp_path):
    alice = new_user(hub, "alice")
    first = publish(hub, alice, "alice", "add-env", "1.0.0", "VALUE = 1\n")
    second = publish(hub, alice, "alice", "add-env", "1.1.0", "VALUE = 2\n")
    prime = Official(official, tmp_path / "home", hub["url"], alice)

    who = prime("whoami")
    assert "alice" in who.stdout

    listed = json.loads(prime("env", "list", "--output", "json").stdout)
    (entry,) = [e for e in listed["environments"] if e["environment"] == "alice/add-env"]
    assert entry["version"] == "1.1.0" and entry["tags"] == ["math"]
    assert entry["visibility"] == "PUBLIC" and entry["description"] == "adds numbers"
    by_name = json.loads(
        prime("env", "list", "--owner", "alice", "--sort", "name", "--output", "json").stdout
    )
    assert by_name["total"] == 1

    status = json.loads(prime("env", "status", "alice/add-env", "--output", "json").stdout)
    assert status["latest_version"]["semantic_version"] == "1.1.0"
    assert "sha256:" + status["latest_version"]["content_hash"] == second["content_hash"]

    info = prime("env", "info", "alice/add-env")
    assert f"{hub['url']}/simple/alice/add-env/" in info.stdout.replace("\n", "")

    versions = prime("env", "version", "list", "alice/add-env", "--full-hashes").stdout
    assert versions.index("1.1.0") < versions.index("1.0.0"), "newest first"
    assert first["content_hash"].removeprefix("sha256:") in versions

    # install: from the hub's simple index, into the venv the client targets
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
    prime("env", "install", "alice/add-env@1.0.0", venv=target)
    imported = subprocess.run(
        [str(target / "bin" / "python"), "-c", "import add_env; print(add_env.VALUE)"],
        capture_output=True,
        text=True,
    )
    assert imported.stdout.strip() == "1", imported.stderr

    # pull: the version's source archive, unpacked
    prime("env", "pull", "alice/add-env@1.1.0", "--target", str(tmp_path / "pulled"))
    pulled = tmp_path / "pulled" / "add_env-1.1.0" / "add_env" / "__init__.py"
    assert pulled.read_text() == "VALUE = 2\n"

    # a private environment: no index or wheel URL, invisible without its owner's token
    publish(hub, alice, "alice", "secret-env", "0.1.0", "X = 0\n", visibility="private")
    details = httpx.get(
        f"{hub['url']}/api/v1/environmentshub/alice/secret-env/@latest",
        headers={"Authorization": f"Bearer {alice}"},
    ).json()["data"]
    assert details["visibility"] == "PRIVATE"
    assert details["install_index_url"] is None and details["wheel_url"] is None
    assert details["package_url"].startswith(hub["url"] + "/files/alice/secret-env/")
    anonymous = httpx.get(f"{hub['url']}/api/v1/environmentshub/alice/secret-env/@latest")
    assert anonymous.status_code == 404 and anonymous.json()["detail"]
    assert "Install (private environment)" in prime("env", "info", "alice/secret-env").stdout

    # deletes: anonymous and someone else may not; the owner deletes one version by its content
    # hash prefix, then the environment
    anonymous = httpx.delete(f"{hub['url']}/api/v1/environmentshub/alice/add-env")
    assert anonymous.status_code == 401 and anonymous.json()["error"]["code"] == "auth_required"
    assert anonymous.json()["detail"], "the official client prints `detail`"
    bob = Official(official, tmp_path / "bob", hub["url"], new_user(hub, "bob"))
    refused = bob("env", "delete", "alice/add-env", "--force", check=False)
    assert "only alice" in refused.stdout.replace("\n", " ")
    assert native(hub, "alice/add-env").status_code == 200
    prefix = first["content_hash"].removeprefix("sha256:")[:10]
    prime("env", "version", "delete", "alice/add-env", prefix, "--force")
    assert native(hub, "alice/add-env").json()["versions"] == ["1.1.0"]
    prime("env", "delete", "alice/add-env", "--force")
    assert native(hub, "alice/add-env").status_code == 404
    shutil.rmtree(target)


@contextlib.contextmanager
def store_of(hub) -> Iterator[Any]:
    """The hub's store (its database, blob store and staging area), opened here as a ``Hub``."""
    from hub_server.services.hub import Hub

    backend = hub["backend"]
    flags = backend.flags
    db = flags[flags.index("--db") + 1] if "--db" in flags else None
    blobs = flags[flags.index("--blobs") + 1] if "--blobs" in flags else None
    endpoint = flags[flags.index("--s3-endpoint") + 1] if "--s3-endpoint" in flags else None
    opened = Hub(hub["data"], db=db, blobs=blobs, s3_endpoint=endpoint, upload_workers=0)
    try:
        yield opened
    finally:
        opened.close()


@contextlib.contextmanager
def staging_of(hub) -> Iterator[StagingArea]:
    """The hub's staging area (beside its blob store), opened here on the same store."""
    with store_of(hub) as opened:
        yield opened.staging


def staged_names(hub) -> list[str]:
    """What the hub holds staged now: the files in its staging area, and the small ones kept
    in their rows (``staging.INLINE_MAX``)."""
    with store_of(hub) as opened, opened.database.read() as db:
        rows = db.execute("SELECT id FROM staged_files WHERE data IS NOT NULL").fetchall()
        return sorted([*opened.staging.names(), *(row["id"] for row in rows)])


def scaffolded(root: Path, name: str) -> Path:
    """``vf-init NAME``'s project under ``root``, with no dependencies (an install resolves
    nothing from PyPI)."""
    subprocess.run(
        [sys.executable, "-m", "verifiers.cli.init", name],
        cwd=root,
        check=True,
        capture_output=True,
    )
    project = root / "environments" / name.replace("-", "_")
    pyproject = project / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('dependencies = ["verifiers>=0.3.1"]', "dependencies = []")
    )
    return project


def test_official_push_is_judged_as_a_native_push(official, hub, tmp_path):
    carol = new_user(hub, "carol")
    auth = {"Authorization": f"Bearer {carol}"}
    api = f"{hub['url']}/api/v1/environmentshub"
    prime = Official(official, tmp_path / "home", hub["url"], carol)
    project = scaffolded(tmp_path, "word-count")
    pyproject = project / "pyproject.toml"

    pushed = prime("env", "push", "--path", str(project), "--visibility", "PUBLIC")
    assert "Successfully pushed carol/word-count" in pushed.stdout, pushed.stdout
    described = native(hub, "carol/word-count").json()
    assert described["versions"] == ["0.1.0"]
    assert staged_names(hub) == [], "a published push leaves nothing staged"

    # the official install then installs what was pushed
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
    prime("env", "install", "carol/word-count@0.1.0", venv=target)
    version = subprocess.run(
        [
            str(target / "bin" / "python"),
            "-c",
            "import importlib.metadata as m;print(m.version('word-count'))",
        ],
        capture_output=True,
        text=True,
    )
    assert version.stdout.strip() == "0.1.0", version.stderr
    # and uninstalls it from that venv (the client's own step: judged by the venv)
    prime("env", "uninstall", "word-count", venv=target)
    gone = subprocess.run(
        [str(target / "bin" / "python"), "-c", "import word_count"], capture_output=True
    )
    assert gone.returncode != 0

    # the same checks as a native push: the version's number is taken, and a package that is not
    # the environment's own is refused at the last finalize
    again = prime("env", "push", "--path", str(project), check=False)
    assert again.returncode != 0 and "already" in again.stdout.replace("\n", " ")

    # an upload URL is single-use, bound to its size and sha256, and only its own push's
    wheel = next((project / "dist").glob("*.whl")).read_bytes()

    sha = hashlib.sha256(wheel).hexdigest()
    declared = {"filename": "word_count-0.2.0-py3-none-any.whl", "sha256": sha, "size": len(wheel)}

    def open_push(token=carol, name="word-count") -> str:
        resp = httpx.post(
            f"{api}/resolve", json={"name": name}, headers={"Authorization": f"Bearer {token}"}
        )
        assert resp.status_code == 200, resp.text
        return resp.json()["data"]["id"]

    push = open_push()
    url = httpx.post(f"{api}/{push}/wheels", json=declared, headers=auth).json()["data"][
        "upload_url"
    ]
    assert url.startswith(hub["url"] + "/api/v1/environmentshub/uploads/") and carol not in url
    wrong = httpx.put(url, content=wheel[:-1] + b"x")
    assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "upload_mismatch"
    assert httpx.put(url, content=wheel).status_code == 404, "a refused URL is spent"
    url = httpx.post(f"{api}/{push}/wheels", json=declared, headers=auth).json()["data"][
        "upload_url"
    ]
    short = httpx.put(url, content=wheel[:100])
    assert short.status_code == 400, "the declared size"
    url = httpx.post(f"{api}/{push}/wheels", json=declared, headers=auth).json()["data"][
        "upload_url"
    ]
    assert httpx.put(url, content=wheel).status_code == 200
    assert httpx.put(url, content=wheel).status_code == 404, "single-use"
    assert httpx.put(url[:-4] + "AAAA", content=wheel).status_code == 404, "unguessable"
    # someone else's push is not found; a declare without a token is refused before its body
    dave = new_user(hub, "dave")
    foreign = httpx.post(
        f"{api}/{push}/wheels", json=declared, headers={"Authorization": f"Bearer {dave}"}
    )
    assert foreign.status_code == 404
    assert httpx.post(f"{api}/{push}/wheels", json=declared).status_code == 401
    refused = httpx.post(
        f"{api}/resolve",
        json={"name": "x", "owner_slug": "carol"},
        headers={"Authorization": f"Bearer {dave}"},
    )
    assert refused.status_code == 403
    # a token-less PUT anywhere but an upload URL is refused by the guard
    assert httpx.put(f"{api}/carol/word-count", content=b"x").status_code == 401
    # a declare over the size cap is refused before any upload
    big = httpx.post(f"{api}/{push}/wheels", json={**declared, "size": 51 * 2**20}, headers=auth)
    assert big.status_code == 413

    # abandoned half-way (the wheel uploaded, never finalized): nothing visible, and once the
    # push expires its staged bytes are collected; an expired URL is refused
    later = open_push()
    stale = httpx.post(f"{api}/{later}/wheels", json=declared, headers=auth).json()["data"][
        "upload_url"
    ]
    assert staged_names(hub), "the abandoned push's wheel is staged"
    time.sleep(2 * URL_TTL + 2)
    assert httpx.put(stale, content=wheel).status_code == 404, "expired"
    finalize = httpx.post(f"{api}/{push}/wheels/x/finalize", headers=auth)
    assert finalize.status_code == 404, "an expired push is gone"
    open_push()  # collects expired pushes
    assert staged_names(hub) == []
    assert native(hub, "carol/word-count").json()["versions"] == ["0.1.0"]

    # --auto-bump: the client bumps the patch version in pyproject.toml and pushes that
    prime("env", "push", "--path", str(project), "--auto-bump")
    assert 'version = "0.1.1"' in pyproject.read_text()
    assert native(hub, "carol/word-count").json()["versions"] == ["0.1.0", "0.1.1"]


def files_under(root: Path) -> dict[str, bytes]:
    """Each file under ``root`` by its relative path, but dotfiles (``.prime/``: the official
    client's own record of what it pulled or pushed)."""
    found = {str(path.relative_to(root)): path for path in root.rglob("*") if path.is_file()}
    return {
        rel: path.read_bytes()
        for rel, path in found.items()
        if not any(part.startswith(".") for part in Path(rel).parts)
    }


def test_an_official_push_keeps_its_source_archive_for_either_clients_pull(official, hub, tmp_path):
    lena = new_user(hub, "lena")
    prime = Official(official, tmp_path / "home", hub["url"], lena)
    project = scaffolded(tmp_path, "pull-me")
    (project / "prompts").mkdir()
    (project / "prompts" / "system.txt").write_text("count the words\n")
    prime("env", "push", "--path", str(project), "--visibility", "PRIVATE")
    pushed = {
        path: data
        for path, data in files_under(project).items()
        if not path.startswith(("dist/", "build/")) and "__pycache__" not in path
    }
    assert {"README.md", "pyproject.toml", "pull_me.py", "prompts/system.txt"} <= set(pushed)

    # the version holds the wheel and the source archive; the index lists only the wheel
    described = native(hub, "lena/pull-me/versions/0.1.0", lena).json()
    kinds = {f["kind"]: f["filename"] for f in described["files"]}
    assert set(kinds) == {"wheel", "source"}
    assert kinds["source"] == "pull_me-0.1.0.source.tar.gz"
    index = httpx.get(f"{hub['url']}/simple/lena/pull-me/pull-me/", headers=bearer(lena))
    assert index.status_code == 200 and kinds["wheel"] in index.text
    assert ".source.tar.gz" not in index.text

    # the official pull (it sends its token to the package URL) gets the pushed files
    prime("env", "pull", "lena/pull-me@0.1.0", "--target", str(tmp_path / "official-pull"))
    assert files_under(tmp_path / "official-pull") == pushed
    # this project's pull extracts it into NAME-VERSION/, as it does an sdist
    prime_native = run_native_pull(hub, lena, "lena/pull-me@0.1.0", tmp_path / "native-pull")
    assert prime_native.returncode == 0, prime_native.stderr
    assert files_under(tmp_path / "native-pull" / "pull_me-0.1.0") == pushed

    # private: nobody else downloads it, with either client
    url = f"{hub['url']}/files/lena/pull-me/{kinds['source']}"
    assert httpx.get(url).status_code == 404
    mona = new_user(hub, "mona")
    assert httpx.get(url, headers=bearer(mona)).status_code == 404
    other = Official(official, tmp_path / "mona", hub["url"], mona)
    refused = other(
        "env", "pull", "lena/pull-me@0.1.0", "--target", str(tmp_path / "m"), check=False
    )
    assert refused.returncode != 0 and not (tmp_path / "m").exists()
    assert run_native_pull(hub, mona, "lena/pull-me@0.1.0", tmp_path / "m2").returncode != 0
    assert not list((tmp_path / "m2").glob("pull_me*"))

    # the page shows the pushed README.md (the official push sends no readme field), and the
    # next version's README replaces it
    assert native(hub, "lena/pull-me", lena).json()["readme"] == pushed["README.md"].decode()
    (project / "README.md").write_text("# pull-me\n\nCounts words, now in a second version.\n")
    prime("env", "push", "--path", str(project), "--auto-bump")
    readme = native(hub, "lena/pull-me", lena).json()["readme"]
    assert readme == "# pull-me\n\nCounts words, now in a second version.\n"


def test_the_official_client_installs_a_private_environment_it_pushed_for_its_owner_only(
    official, hub, tmp_path
):
    olga = new_user(hub, "olga")
    prime = Official(official, tmp_path / "home", hub["url"], olga)
    project = scaffolded(tmp_path, "hidden-words")
    prime("env", "push", "--path", str(project), "--visibility", "PRIVATE")
    described = native(hub, "olga/hidden-words/versions/0.1.0", olga).json()
    assert {f["kind"] for f in described["files"]} == {"wheel", "source"}
    details = httpx.get(
        f"{hub['url']}/api/v1/environmentshub/olga/hidden-words/@latest", headers=bearer(olga)
    ).json()["data"]
    assert details["install_index_url"] is None and details["wheel_url"] is None
    assert details["package_url"].endswith("hidden_words-0.1.0.source.tar.gz")

    # its owner installs it (from the source archive, with the owner's token) and it imports
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
    prime("env", "install", "olga/hidden-words@0.1.0", venv=target)
    imported = subprocess.run(
        [
            str(target / "bin" / "python"),
            "-c",
            "import importlib.metadata as m, importlib.util as u;"
            "print(m.version('hidden-words'), u.find_spec('hidden_words').name)",
        ],
        capture_output=True,
        text=True,
    )
    assert imported.stdout.split() == ["0.1.0", "hidden_words"], imported.stderr

    # another user's token: refused, saying so (a private environment answers as one that does
    # not exist), and nothing lands in that user's venv
    pavel = Official(official, tmp_path / "pavel", hub["url"], new_user(hub, "pavel"))
    other = tmp_path / "other"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other)], check=True)
    refused = pavel("env", "install", "olga/hidden-words@0.1.0", venv=other, check=False)
    said = " ".join((refused.stdout + refused.stderr).split())
    assert refused.returncode != 0 and "404: no environment olga/hidden-words" in said, said
    assert not list((other / "lib").glob("python*/site-packages/hidden_words*"))


def run_native_pull(hub, token: str, spec: str, target: Path) -> subprocess.CompletedProcess:
    """This project's ``prime env pull SPEC -d TARGET``."""
    target.mkdir()
    return native_prime(hub, token, "env", "pull", spec, "-d", str(target), cwd=target, check=False)


def test_an_unsafe_source_archive_fails_the_last_finalize_and_publishes_nothing(hub):
    nina = new_user(hub, "nina")
    api = f"{hub['url']}/api/v1/environmentshub"
    (wheel_name, wheel), _ = package("linked-env", "1.0.0", "X = 1\n")
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        link = tarfile.TarInfo("pyproject.toml")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    push = httpx.post(f"{api}/resolve", json={"name": "linked-env"}, headers=bearer(nina))
    push_id = push.json()["data"]["id"]
    wheel_id = stage(api, nina, push_id, "wheels", wheel_name, wheel)
    assert httpx.post(
        f"{api}/{push_id}/wheels/{wheel_id}/finalize", headers=bearer(nina)
    ).is_success
    source_id = stage(
        api, nina, push_id, "versions", "linked-env-1.0.0-abcdef12.tar.gz", archive.getvalue()
    )
    refused = httpx.post(  # the hub's first publish: its upload workers start (60 s)
        f"{api}/{push_id}/versions/{source_id}/finalize", headers=bearer(nina), timeout=60
    )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "unsafe_member"
    assert "source archive" in refused.json()["detail"]
    assert native(hub, "nina/linked-env").status_code == 404, "nothing was published"


def test_a_team_members_staged_push_cannot_make_a_private_environment_public(hub):
    """Prime's staged push asks for a visibility at its resolve; a plain member of the team
    asking for PUBLIC on the team's private environment is refused at the last finalize, as the
    native push is (only the team's owners change it), and the same push without it publishes."""
    owner, member = new_user(hub, "vera"), new_user(hub, "vick")
    team = "vera-crew"
    assert httpx.post(f"{hub['url']}/api/v1/teams", json={"name": team}, headers=bearer(owner))
    added = httpx.post(
        f"{hub['url']}/api/v1/teams/{team}/members", json={"user": "vick"}, headers=bearer(owner)
    )
    assert added.status_code == 201, added.text
    publish(hub, owner, team, "crew-words", "1.0.0", "X = 1\n", visibility="private")
    api = f"{hub['url']}/api/v1/environmentshub"

    def staged_push(visibility: str | None, version: str) -> httpx.Response:
        (wheel_name, wheel), (sdist_name, sdist) = package("crew-words", version, "X = 2\n")
        body = {"name": "crew-words", "team_slug": team, "visibility": visibility}
        push_id = httpx.post(f"{api}/resolve", json=body, headers=bearer(member)).json()["data"]
        wheel_id = stage(api, member, push_id["id"], "wheels", wheel_name, wheel)
        done = httpx.post(
            f"{api}/{push_id['id']}/wheels/{wheel_id}/finalize", headers=bearer(member)
        )
        assert done.is_success, done.text
        source_id = stage(api, member, push_id["id"], "versions", sdist_name, sdist)
        return httpx.post(  # the hub's first publish may start its upload workers (60 s)
            f"{api}/{push_id['id']}/versions/{source_id}/finalize",
            headers=bearer(member),
            timeout=60,
        )

    refused = staged_push("PUBLIC", "1.1.0")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_owner"
    assert native(hub, f"{team}/crew-words").status_code == 404, "still private"
    kept = staged_push(None, "1.1.0")
    assert kept.status_code == 200 and kept.json()["data"]["version"] == "1.1.0", kept.text
    assert native(hub, f"{team}/crew-words").status_code == 404, "still private"
    assert native(hub, f"{team}/crew-words", member).json()["latest_version"] == "1.1.0"


@pytest.mark.parametrize("kept", ["row", "staging area"])
def test_staged_bytes_lost_before_the_last_finalize_are_refused_and_nothing_is_published(hub, kept):
    """The staging area is written without fsync (its bytes are nobody's yet), so a crash may
    leave a staged file other than its PUT was checked against: the last finalize refuses it
    by its declared sha256 (here a valid wheel that would publish) instead of judging it. A
    small file kept in its row is checked the same way."""
    nina = new_user(hub, f"nina-lost-{kept[0]}")
    api = f"{hub['url']}/api/v1/environmentshub"
    padding = "" if kept == "row" else "#" * INLINE_MAX  # a wheel too large for its row
    (wheel_name, wheel), (_, source) = package("lost-env", "1.0.0", "X = 1\n" + padding)
    push = httpx.post(f"{api}/resolve", json={"name": "lost-env"}, headers=bearer(nina))
    push_id = push.json()["data"]["id"]
    wheel_id = stage(api, nina, push_id, "wheels", wheel_name, wheel)
    finalized = httpx.post(f"{api}/{push_id}/wheels/{wheel_id}/finalize", headers=bearer(nina))
    assert finalized.is_success, finalized.text
    (_, other), _ = package("lost-env", "1.0.0", "X = 2\n" + padding)
    with store_of(hub) as store:  # not the bytes the PUT sent
        if kept == "row":
            with store.database.transaction() as db:
                db.execute("UPDATE staged_files SET data=? WHERE id=?", (other, wheel_id))
        else:
            store.staging.put(wheel_id, io.BytesIO(other))
    source_id = stage(api, nina, push_id, "versions", "lost-env-1.0.0.tar.gz", source)
    refused = httpx.post(  # the hub's first publish: its upload workers start (60 s)
        f"{api}/{push_id}/versions/{source_id}/finalize", headers=bearer(nina), timeout=60
    )
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "upload_missing"
    assert "was lost: push again" in refused.json()["detail"]
    assert native(hub, f"nina-lost-{kept[0]}/lost-env").status_code == 404, "nothing published"


def test_a_small_staged_file_is_kept_in_its_row_a_large_one_in_the_staging_area(hub):
    """A staged file of at most ``INLINE_MAX`` bytes is kept in its row (on S3: no PUT, GET or
    DELETE of its own), a larger one in the staging area; the last finalize publishes both
    kinds, byte for byte, and leaves nothing staged in either place."""
    owen = new_user(hub, "owen-sizes")
    api = f"{hub['url']}/api/v1/environmentshub"
    (wheel_name, wheel), (_, source) = package("sized-env", "1.0.0", "X = 1\n" + "#" * INLINE_MAX)
    push_id = httpx.post(f"{api}/resolve", json={"name": "sized-env"}, headers=bearer(owen))
    push_id = push_id.json()["data"]["id"]
    wheel_id = stage(api, owen, push_id, "wheels", wheel_name, wheel)
    source_id = stage(api, owen, push_id, "versions", "sized-env-1.0.0.tar.gz", source)
    assert len(wheel) > INLINE_MAX >= len(source)
    with staging_of(hub) as staging:
        assert wheel_id in staging.names() and source_id not in staging.names()
    assert source_id in staged_names(hub), "the source archive is kept in its row"
    finalized = httpx.post(f"{api}/{push_id}/wheels/{wheel_id}/finalize", headers=bearer(owen))
    assert finalized.is_success, finalized.text
    published = httpx.post(
        f"{api}/{push_id}/versions/{source_id}/finalize", headers=bearer(owen), timeout=60
    )
    assert published.status_code == 200, published.text
    assert not {wheel_id, source_id} & set(staged_names(hub)), "nothing of the push is staged"
    version = native(hub, "owen-sizes/sized-env/versions/1.0.0", owen).json()
    files = {f["filename"]: f for f in version["files"]}
    assert files[wheel_name]["sha256"] == hashlib.sha256(wheel).hexdigest()
    pulled = httpx.get(
        f"{hub['url']}/files/owen-sizes/sized-env/{wheel_name}", headers=bearer(owen)
    )
    assert pulled.content == wheel


def test_a_staged_request_the_fast_path_cannot_read_gets_the_routes_own_answer(hub):
    """The staged push's requests are answered by a fast path; a body it cannot read (not JSON,
    not the route's model, a media type the framework does not read as JSON) is replayed to the
    route, which refuses it as it always has, naming the field; a good one then succeeds."""
    pia = new_user(hub, "pia-bodies")
    api = f"{hub['url']}/api/v1/environmentshub"
    missing = httpx.post(f"{api}/resolve", json={"nam": "x"}, headers=bearer(pia))
    assert missing.status_code == 422 and missing.json()["error"]["code"] == "invalid_request"
    assert "body.name" in missing.json()["detail"]
    broken = httpx.post(
        f"{api}/resolve",
        content=b'{"name": ',
        headers={**bearer(pia), "Content-Type": "application/json"},
    )
    assert broken.status_code == 422 and broken.json()["error"]["code"] == "invalid_request"
    as_text = httpx.post(
        f"{api}/resolve",
        content=b'{"name": "x"}',
        headers={**bearer(pia), "Content-Type": "text/plain"},
    )
    assert as_text.status_code == 422, "the framework reads only JSON media types as JSON"
    push = httpx.post(f"{api}/resolve", json={"name": "bodies-env"}, headers=bearer(pia))
    assert push.status_code == 200, push.text
    push_id = push.json()["data"]["id"]
    no_size = {"filename": "bodies_env-1.0.0-py3-none-any.whl", "sha256": "0" * 64}
    unsized = httpx.post(f"{api}/{push_id}/wheels", json=no_size, headers=bearer(pia))
    assert unsized.status_code == 400 and unsized.json()["error"]["code"] == "invalid_size"
    wrong_type = httpx.post(
        f"{api}/{push_id}/wheels", json={**no_size, "size": "many"}, headers=bearer(pia)
    )
    assert wrong_type.status_code == 422 and "body.size" in wrong_type.json()["detail"]
    read_only = httpx.post(  # the guard's principal, the scopes checked by the same function
        f"{hub['url']}/api/v1/tokens", json={"name": "ro", "scopes": ["read"]}, headers=bearer(pia)
    )
    assert read_only.status_code in (200, 201), read_only.text
    refused = httpx.post(
        f"{api}/resolve", json={"name": "bodies-env"}, headers=bearer(read_only.json()["token"])
    )
    assert refused.status_code == 403, refused.text


def stage(api: str, token: str, push_id: str, route: str, filename: str, body: bytes) -> str:
    """Declare a file of a staged push and PUT its bytes: its staged id."""
    declared = {"filename": filename, "sha256": hashlib.sha256(body).hexdigest(), "size": len(body)}
    answer = httpx.post(f"{api}/{push_id}/{route}", json=declared, headers=bearer(token))
    assert answer.status_code == 200, answer.text
    staged = answer.json()["data"]
    assert httpx.put(staged["upload_url"], content=body).status_code == 200
    return staged["wheel_id" if route == "wheels" else "version_id"]


def test_bumped_copies_share_a_content_hash_and_the_refusal_names_a_working_delete(hub, tmp_path):
    """Versions that differ only in their number (``--bump``) share a content hash: the official
    client's delete by that hash is refused naming them, and the command the refusal names
    (this project's ``prime``) deletes the one version it is given."""
    tess = new_user(hub, "tess")
    first = publish(hub, tess, "tess", "twin-env", "1.0.0", "X = 1\n")
    publish(hub, tess, "tess", "twin-env", "1.0.1", "X = 1\n")
    prefix = first["content_hash"].removeprefix("sha256:")[:8]
    refused = httpx.delete(
        f"{hub['url']}/api/v1/environmentshub/tess/twin-env/@{prefix}", headers=bearer(tess)
    )
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "ambiguous_content_hash"
    message = refused.json()["detail"]
    assert "versions 1.0.0, 1.0.1" in message
    hinted = re.search(r"prime (env delete \S+@VERSION --yes)", message)
    assert hinted is not None, message
    command = hinted.group(1).replace("VERSION", "1.0.0").split()
    native_prime(hub, tess, *command, cwd=tmp_path)
    assert native(hub, "tess/twin-env").json()["versions"] == ["1.0.1"]


# --- evals: `prime eval push`, `list`, `get`, `samples` -------------------------------------------
def run_dir(root: Path, version: dict, run_id: str | None, rewards: list[float]) -> Path:
    """A results dir as this project's vf-eval writes it (``metadata.json``, ``results.jsonl``);
    ``run_id=None``: as upstream vf-eval writes it, with neither run id nor content hash."""
    meta = {
        "env_id": f"{version['owner']}/{version['name']}",
        "env_version": version["version"],
        "model": "gpt-test",
        "num_examples": len(rewards),
        "rollouts_per_example": 1,
        "avg_reward": sum(rewards) / len(rewards),
        "summary": {"avg_reward": sum(rewards) / len(rewards)},
    }
    if run_id is not None:
        meta |= {"env_content_hash": version["content_hash"], "run_id": run_id}
    root.mkdir(parents=True)
    (root / "metadata.json").write_text(json.dumps(meta))
    rows = [
        {
            "example_id": i,
            "prompt": [{"role": "user", "content": f"add {i} and 1"}],
            "completion": [{"role": "assistant", "content": str(i + 1)}],
            "reward": r,
            "metrics": {"exact": r},
        }
        for i, r in enumerate(rewards)
    ]
    (root / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def evals_of(hub, owner: str, name: str, version: str, token: str | None = None) -> list[dict]:
    resp = native(hub, f"{owner}/{name}/versions/{version}/evals", token)
    assert resp.status_code == 200, resp.text
    return resp.json()


def pushed_id(done: subprocess.CompletedProcess) -> str:
    line = next(x for x in done.stdout.splitlines() if x.startswith("Evaluation ID:"))
    return line.split(":", 1)[1].strip()


def test_official_eval_push_attaches_the_run_to_its_version_and_lists_it(official, hub, tmp_path):
    erin = new_user(hub, "erin")
    first = publish(hub, erin, "erin", "scorer", "1.0.0", "X = 1\n")
    publish(hub, erin, "erin", "scorer", "1.1.0", "X = 2\n")
    prime = Official(official, tmp_path / "home", hub["url"], erin)

    rewards = [1.0, 0.0, 1.0, 1.0]
    run = run_dir(tmp_path / "run", first, "run-erin-1", rewards)
    pushed = prime("eval", "push", str(run))
    eval_id = pushed_id(pushed)
    # the run named 1.0.0 (the client never sends a version): it hangs there, not on latest
    (attached,) = evals_of(hub, "erin", "scorer", "1.0.0")
    assert attached["num_rollouts"] == 4 and attached["summary"]["avg_reward"] == 0.75
    assert attached["model"] == "gpt-test" and attached["uploaded_by"] == "erin"
    assert evals_of(hub, "erin", "scorer", "1.1.0") == []
    # its printed link lands on the hub's page of the environment, at the eval
    link = f"{hub['url']}/dashboard/evaluations/{eval_id}"
    assert link in pushed.stdout.replace("\n", "")
    landed = httpx.get(link)
    assert landed.status_code == 302
    assert landed.headers["location"] == f"/e/erin/scorer#eval-{attached['id']}"
    assert f'id="eval-{attached["id"]}"' in httpx.get(hub["url"] + "/e/erin/scorer").text

    listed = json.loads(prime("eval", "list", "--output", "json").stdout)
    (entry,) = listed["evaluations"]
    assert entry["evaluation_id"] == eval_id and listed["total"] == 1
    assert entry["environment_names"] == ["erin/scorer"] and entry["version"] == "1.0.0"
    table = prime("eval", "list").stdout
    assert eval_id[:8] in table and "gpt-test" in table
    got = json.loads(prime("eval", "get", eval_id).stdout)
    assert got["total_samples"] == 4 and got["metrics"]["avg_reward"] == 0.75
    assert got["metadata"]["run_id"] == "run-erin-1"
    samples = json.loads(prime("eval", "samples", eval_id, "--num", "3").stdout)
    assert [s["example_id"] for s in samples["samples"]] == [0, 1, 2]
    assert samples["samples"][1]["completion"][0]["content"] == "2" and samples["total"] == 4

    # a run of upstream vf-eval (no content hash, no run id) is refused, saying why
    upstream = run_dir(tmp_path / "upstream", first, None, rewards)
    refused = prime("eval", "push", str(upstream), check=False)
    said = refused.stdout.replace("\n", " ")
    assert refused.returncode != 0 and "env_content_hash, run_id" in said, said
    # a run of another version's code is refused by the native attach's own check
    other = {**first, "content_hash": "sha256:" + "0" * 64}
    mismatched = prime(
        "eval", "push", str(run_dir(tmp_path / "m", other, "r2", [1.0])), check=False
    )
    assert mismatched.returncode != 0 and "content hash" in mismatched.stdout.replace("\n", " ")
    assert len(evals_of(hub, "erin", "scorer", "1.0.0")) == 1

    # a private environment: its owner attaches; another user neither reads nor attaches
    hidden = publish(hub, erin, "erin", "hidden", "0.1.0", "Y = 0\n", visibility="private")
    secret_id = pushed_id(prime("eval", "push", str(run_dir(tmp_path / "h", hidden, "h1", [0.5]))))
    assert len(evals_of(hub, "erin", "hidden", "0.1.0", erin)) == 1
    frank = Official(official, tmp_path / "frank", hub["url"], new_user(hub, "frank"))
    assert frank("eval", "get", secret_id, check=False).returncode != 0
    assert httpx.get(f"{hub['url']}/api/v1/evaluations/{secret_id}").status_code == 404
    assert httpx.get(f"{hub['url']}/dashboard/evaluations/{secret_id}").status_code == 404
    assert json.loads(frank("eval", "list", "--output", "json").stdout)["evaluations"] == []
    theirs = frank("eval", "push", str(run_dir(tmp_path / "f", hidden, "f1", [0.5])), check=False)
    assert theirs.returncode != 0
    public = frank("eval", "push", str(run_dir(tmp_path / "g", first, "f2", [0.5])), check=False)
    assert public.returncode != 0 and "only erin" in public.stdout.replace("\n", " ")
    assert len(evals_of(hub, "erin", "hidden", "0.1.0", erin)) == 1
    assert len(evals_of(hub, "erin", "scorer", "1.0.0")) == 1


def test_eval_sample_batches_out_of_order_and_the_size_bound(hub, tmp_path):
    gina = new_user(hub, "gina")
    auth = {"Authorization": f"Bearer {gina}"}
    api = f"{hub['url']}/api/v1/evaluations"
    version = publish(hub, gina, "gina", "batched", "2.0.0", "Z = 0\n")
    env_id = httpx.get(f"{hub['url']}/api/v1/environmentshub/gina/batched/@latest").json()
    meta = json.loads(
        run_dir(tmp_path / "run", version, "batches-1", [1.0]).joinpath("metadata.json").read_text()
    )

    def create(run_id: str) -> str:
        body = {
            "name": "batched",
            "environments": [{"id": env_id["data"]["id"]}],
            "metadata": {**meta, "run_id": run_id},
        }
        resp = httpx.post(f"{api}/", json=body, headers=auth)
        assert resp.status_code == 200, resp.text
        return resp.json()["evaluation_id"]

    eval_id = create("batches-1")
    rows = [{"example_id": i, "reward": float(i % 2)} for i in range(40)]
    batches = [rows[i : i + 10] for i in range(0, 40, 10)][::-1]  # last rows first

    from concurrent.futures import ThreadPoolExecutor

    def send(batch: list[dict]) -> int:
        return httpx.post(
            f"{api}/{eval_id}/samples", json={"samples": batch}, headers=auth, timeout=60
        ).status_code

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(send, batches)) == [200] * 4
    # nothing is visible before the finalize; someone else cannot add to it
    assert evals_of(hub, "gina", "batched", "2.0.0") == []
    assert httpx.get(f"{api}/{eval_id}", headers=auth).status_code == 404
    harry = {"Authorization": f"Bearer {new_user(hub, 'harry')}"}
    foreign = httpx.post(f"{api}/{eval_id}/samples", json={"samples": rows}, headers=harry)
    assert foreign.status_code == 404 and foreign.json()["detail"]
    assert httpx.post(f"{api}/{eval_id}/samples", json={"samples": rows}).status_code == 401
    bad = httpx.post(f"{api}/{eval_id}/samples", json={"samples": [{"reward": "x"}]}, headers=auth)
    assert bad.status_code == 400 and "reward" in bad.json()["detail"]

    done = httpx.post(f"{api}/{eval_id}/finalize", json={}, headers=auth)
    assert done.status_code == 200, done.text
    again = httpx.post(f"{api}/{eval_id}/finalize", json={}, headers=auth)
    assert again.json()["eval_id"] == done.json()["eval_id"], "a retried finalize answers the same"
    (attached,) = evals_of(hub, "gina", "batched", "2.0.0")
    assert attached["num_rollouts"] == 40 and attached["summary"]["avg_reward"] == 0.5
    assert attached["summary"]["num_examples"] == 40
    got = httpx.get(f"{api}/{eval_id}/samples", params={"limit": 500}, headers=auth).json()
    assert sorted(s["example_id"] for s in got["samples"]) == list(range(40))
    late = httpx.post(f"{api}/{eval_id}/samples", json={"samples": rows}, headers=auth)
    assert late.status_code == 409, "a finalized evaluation takes no more samples"

    # a batch may be 25 MB (past the 1 MiB JSON cap, which holds for every other body)
    big = create("batches-2")
    row = {"example_id": 0, "reward": 1.0, "completion": "x" * (5 * 2**20)}
    batch = {"samples": [row] * 4}  # ~20 MiB
    for _ in range(2):
        assert httpx.post(f"{api}/{big}/samples", json=batch, headers=auth, timeout=120).is_success
    # ... and one eval holds at most 50 MiB of samples
    over = httpx.post(f"{api}/{big}/samples", json=batch, headers=auth, timeout=120)
    assert over.status_code == 400 and over.json()["error"]["code"] == "eval_too_large"
    huge = httpx.post(f"{api}/{big}/samples", json={"samples": [row] * 6}, headers=auth)
    assert huge.status_code == 413 and huge.json()["error"]["code"] == "body_too_large"
    create_big = httpx.post(f"{api}/", json={"metadata": {"x": "y" * 2**21}}, headers=auth)
    assert create_big.status_code == 413
    finalized = httpx.post(f"{api}/{big}/finalize", json={}, headers=auth, timeout=120)
    assert finalized.status_code == 200, finalized.text
    assert len(evals_of(hub, "gina", "batched", "2.0.0")) == 2


# --- prime login: a device flow approved in the hub's web pages -----------------------------------------
CHALLENGE = "/dashboard/tokens/challenge"
PRINTED_CODE = re.compile(r"/dashboard/tokens/challenge\?code=([A-Z0-9-]+)")


class Running:
    """An interactive command's merged output, read as it comes (a thread drains the pipe)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process, self.lines = process, []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: re.Pattern, timeout: float = 120) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := pattern.search(self.text()):
                return found
            if self.process.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.1)
        self.process.kill()
        raise AssertionError(f"never printed {pattern.pattern}:\n{self.text()}")

    def finish(self, timeout: float) -> tuple[int, str]:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"still running after {timeout} s:\n{self.text()}") from None
        self.reader.join(10)
        return code, self.text()


def form_csrf(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def web_sign_in(hub, token: str, next_path: str) -> tuple[httpx.Client, httpx.Response]:
    """A browser signed in to the hub's pages (the sign-in form's CSRF token, posted from the
    hub's own origin) and the page sign-in led it to (``next_path``)."""
    browser = httpx.Client(base_url=hub["url"], timeout=30, follow_redirects=True)
    form = browser.get("/login", params={"next": next_path})
    landed = browser.post(
        "/login",
        data={"token": token, "csrf": form_csrf(form.text), "next": next_path},
        headers={"Origin": hub["url"]},
    )
    assert landed.status_code == 200, landed.text
    return browser, landed


def decide(browser: httpx.Client, hub, code: str, decision: str, csrf: str) -> httpx.Response:
    return browser.post(
        CHALLENGE,
        data={"code": code, "decision": decision, "csrf": csrf},
        headers={"Origin": hub["url"]},
    )


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def login_tokens(hub, token: str) -> list[dict]:
    tokens = httpx.get(f"{hub['url']}/api/v1/tokens", headers=bearer(token)).json()
    return [t for t in tokens if t["name"].startswith("prime login")]


def test_official_login_is_approved_in_the_browser_and_saves_a_working_key(official, hub, tmp_path):
    iris = new_user(hub, "iris")
    prime = Official(official, tmp_path / "home", hub["url"], None)
    running = Running(prime.start("login", "--headless"))
    code = running.wait_for(PRINTED_CODE).group(1)
    link = f"{CHALLENGE}?code={code}"
    assert f"{hub['url']}{link}" in running.text(), "the printed link is this hub's page"

    # someone not signed in sees a sign-in link, and a post with a valid form token is refused
    anonymous = httpx.Client(base_url=hub["url"], timeout=30)
    page = anonymous.get(link)
    assert page.status_code == 200 and "Sign in to this hub" in page.text
    assert 'value="approve"' not in page.text
    sign_in_form = anonymous.get("/login").text  # a valid form token, with no session
    refused = decide(anonymous, hub, code, "approve", form_csrf(sign_in_form))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "sign_in_required"

    # iris signs in, lands back on the page, sees the code; forged posts change nothing
    browser, landed = web_sign_in(hub, iris, link)
    assert landed.url.path == CHALLENGE and code in landed.text and "iris" in landed.text
    csrf = form_csrf(landed.text)
    forged = decide(browser, hub, code, "approve", "not-the-session-token")
    assert forged.status_code == 403 and forged.json()["error"]["code"] == "csrf_failed"
    elsewhere = browser.post(
        CHALLENGE,
        data={"code": code, "decision": "approve", "csrf": csrf},
        headers={"Origin": "http://evil.example"},
    )
    assert elsewhere.status_code == 403 and elsewhere.json()["error"]["code"] == "csrf_failed"
    approved = decide(browser, hub, code, "approve", csrf)
    assert approved.status_code == 200 and "Approved" in approved.text

    returncode, output = running.finish(60)
    assert returncode == 0 and "Successfully logged in" in output, output
    key = prime.api_key()
    assert key.startswith("vfh_") and key != iris
    assert "iris" in prime("whoami").stdout
    (made,) = login_tokens(hub, iris)  # named for the login, listed, revocable
    assert made["scopes"] == ["publish", "read"] and not made["revoked"]

    # the code is spent: approving it again finds nothing
    again = decide(browser, hub, code, "approve", csrf)
    assert again.status_code == 404 and "No login is waiting" in again.text
    revoked = httpx.delete(f"{hub['url']}/api/v1/tokens/{made['id']}", headers=bearer(iris))
    assert revoked.status_code == 204
    assert prime("whoami", check=False).returncode != 0, "a revoked login key is refused"


def test_a_denied_or_expired_official_login_ends_with_no_key(official, hub, tmp_path):
    jack = new_user(hub, "jack")
    denied_cli = Official(official, tmp_path / "denied", hub["url"], None)
    expired_cli = Official(official, tmp_path / "expired", hub["url"], None)
    denied, expired = (Running(c.start("login", "--headless")) for c in (denied_cli, expired_cli))
    denied_code = denied.wait_for(PRINTED_CODE).group(1)
    expired_code = expired.wait_for(PRINTED_CODE).group(1)

    browser, landed = web_sign_in(hub, jack, f"{CHALLENGE}?code={denied_code}")
    answer = decide(browser, hub, denied_code, "deny", form_csrf(landed.text))
    assert answer.status_code == 200 and "Denied" in answer.text
    for running, cli in ((denied, denied_cli), (expired, expired_cli)):
        _, output = running.finish(LOGIN_TTL + 30)  # the CLI polls every 5 s
        assert "Challenge expired" in output and "Successfully" not in output, output
        assert "Traceback" not in output
        assert cli.api_key() == ""

    # the expired code can no longer be approved, and no token was made
    late = browser.get(CHALLENGE, params={"code": expired_code})
    assert late.status_code == 404 and "No login is waiting" in late.text
    refused = decide(browser, hub, expired_code, "approve", form_csrf(late.text))
    assert refused.status_code == 404
    assert login_tokens(hub, jack) == []


def rsa_key(bits: int = 2048):
    from cryptography.hazmat.primitives.asymmetric import rsa

    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def pem(key) -> str:
    from cryptography.hazmat.primitives import serialization

    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def unseal(key, result: str) -> str:
    """What the official client does with ``result`` (OAEP, SHA-256, MGF1-SHA-256)."""
    import base64

    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    oaep = padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=None)
    return key.decrypt(base64.b64decode(result), oaep).decode()


def test_a_login_token_is_sealed_to_the_clients_key_and_given_once(hub):
    api = f"{hub['url']}/api/v1/auth_challenge"
    kate = new_user(hub, "kate")
    key = rsa_key()

    def generate(public_key: object = None) -> httpx.Response:
        return httpx.post(f"{api}/generate", json={"encryptionPublicKey": public_key or pem(key)})

    def poll(challenge: dict, status_token: str | None = None) -> httpx.Response:
        token = status_token or challenge["status_auth_token"]
        return httpx.get(
            f"{api}/status", params={"challenge": challenge["challenge"]}, headers=bearer(token)
        )

    # a key the client could not have made, or one too weak, is refused with a detail
    from cryptography.hazmat.primitives.asymmetric import ec

    curve = ec.generate_private_key(ec.SECP256R1())
    for bad in ("not a key", pem(rsa_key(1024)), pem(curve), "x" * 20000):
        refused = generate(bad)
        assert refused.status_code in (400, 413), refused.text
        assert refused.json()["detail"], "the official client prints `detail`"
    assert generate(pem(rsa_key(1024))).json()["error"]["code"] == "invalid_public_key"

    challenge = generate().json()
    other = generate().json()  # waits, undecided, until the bound below
    assert other["challenge"] != challenge["challenge"]
    assert poll(challenge).json() == {"status": "pending", "result": None}
    assert poll(challenge, "guessed").status_code == 404
    no_bearer = httpx.get(f"{api}/status", params={"challenge": challenge["challenge"]})
    assert no_bearer.status_code == 404

    # a read-only session may not mint a token: the login stays pending
    reader = httpx.post(
        f"{hub['url']}/api/v1/tokens",
        json={"name": "web", "scopes": ["read"]},
        headers=bearer(kate),
    ).json()["token"]
    link = f"{CHALLENGE}?code={challenge['challenge']}"
    read_only, landed = web_sign_in(hub, reader, link)
    refused = decide(read_only, hub, challenge["challenge"], "approve", form_csrf(landed.text))
    assert refused.status_code == 403 and "publish" in refused.text
    assert poll(challenge).json()["result"] is None

    browser, landed = web_sign_in(hub, kate, link)
    csrf = form_csrf(landed.text)
    approved = decide(browser, hub, challenge["challenge"], "approve", csrf)
    assert approved.status_code == 200
    assert poll(challenge, "guessed").status_code == 404, "only its own status token fetches it"
    with ThreadPoolExecutor(4) as pool:  # polls at once: one gets the token, once
        answers = list(pool.map(lambda _: poll(challenge), range(4)))
    (delivered,) = [a for a in answers if a.status_code == 200]
    token = unseal(key, delivered.json()["result"])
    me = httpx.get(f"{hub['url']}/api/v1/me", headers=bearer(token)).json()
    assert me["user"] == "kate" and me["scopes"] == ["publish", "read"]
    for answer in [a for a in answers if a is not delivered] + [poll(challenge)]:
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "challenge_not_found"
    assert len(login_tokens(hub, kate)) == 1

    # approved by a session whose token is revoked before the fetch: no token is made
    web = httpx.post(f"{hub['url']}/api/v1/tokens", json={"name": "web"}, headers=bearer(kate))
    later = generate().json()
    session, landed = web_sign_in(
        hub, web.json()["token"], f"{CHALLENGE}?code={later['challenge']}"
    )
    decide(session, hub, later["challenge"], "approve", form_csrf(landed.text))
    httpx.delete(f"{hub['url']}/api/v1/tokens/{web.json()['id']}", headers=bearer(kate))
    gone = poll(later)
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "login_denied"
    assert len(login_tokens(hub, kate)) == 1

    # an address may have 10 logins waiting; the next is refused until one is decided
    waiting = [other, *(generate().json() for _ in range(9))]
    full = generate()
    assert full.status_code == 429 and full.json()["error"]["code"] == "too_many_logins"
    assert full.json()["detail"]
    for each in waiting:
        decide(browser, hub, each["challenge"], "deny", csrf)
        denied = poll(each)
        assert denied.status_code == 404 and denied.json()["error"]["code"] == "login_denied"
    assert generate().status_code == 200


def test_the_links_the_official_cli_prints_land_on_the_hubs_pages(hub):
    from support.hubs import eval_files

    hana = new_user(hub, "hana")
    version = publish(hub, hana, "hana", "links-env", "1.0.0", "X = 1\n")
    moved = httpx.get(f"{hub['url']}/dashboard/environments/hana/links-env")
    assert moved.status_code == 302 and moved.headers["location"] == "/e/hana/links-env"
    assert "hana/links-env" in httpx.get(f"{hub['url']}/e/hana/links-env").text

    evals = f"{hub['url']}/api/v1/environments/hana/links-env/versions/1.0.0/evals"
    attached = httpx.post(evals, files=eval_files(version, "run-1", [1.0]), headers=bearer(hana))
    assert attached.status_code == 201, attached.text
    eval_id = attached.json()["id"]
    moved = httpx.get(f"{hub['url']}/dashboard/evaluations/{eval_id}")
    assert moved.status_code == 302
    assert moved.headers["location"] == f"/e/hana/links-env#eval-{eval_id}"
    assert f'id="eval-{eval_id}"' in httpx.get(f"{hub['url']}/e/hana/links-env").text

    # a private environment's eval is found only by who may read it
    private = publish(hub, hana, "hana", "hidden-env", "1.0.0", "X = 1\n", visibility="private")
    hidden = httpx.post(
        f"{hub['url']}/api/v1/environments/hana/hidden-env/versions/1.0.0/evals",
        files=eval_files(private, "run-2", [0.5]),
        headers=bearer(hana),
    ).json()["id"]
    assert httpx.get(f"{hub['url']}/dashboard/evaluations/{hidden}").status_code == 404
    browser, _ = web_sign_in(hub, hana, "/")
    owner_view = browser.get(f"/dashboard/evaluations/{hidden}", follow_redirects=False)
    assert owner_view.headers["location"] == f"/e/hana/hidden-env#eval-{hidden}"
    for missing in ("999999", "abc"):
        assert httpx.get(f"{hub['url']}/dashboard/evaluations/{missing}").status_code == 404
    # sign-in goes back only to a page of this hub, never to another origin
    for elsewhere in ("//evil.example/x", "/\\evil.example", "https://evil.example/", "/\t/x"):
        _, landed = web_sign_in(hub, hana, elsewhere)
        assert str(landed.url) == f"{hub['url']}/", elsewhere
