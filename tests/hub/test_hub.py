"""The Environments Hub: a real server process, the real `prime` CLI, real uv builds and installs."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tarfile
import time
import uuid
import zipfile
from pathlib import Path

import httpx
import pytest

from hub_client.client import HubAPIError, HubClient
from hub_client.versions import bump, set_version
from hub_server.process import start_hub

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def hub(tmp_path_factory, hub_backend):
    data = tmp_path_factory.mktemp("hub-data")
    admin = hub_backend.create_user(data, "admin", is_admin=True)
    with start_hub(data, backend=hub_backend.flags, sdk=True) as server:
        yield {"url": server.url, "admin": admin, "data": data, "backend": hub_backend}


def new_user(hub, name: str) -> str:
    return HubClient(hub["url"], hub["admin"]).create_user(name).token


def prime(hub, token, *args, cwd=None, check=True):
    env = {
        **os.environ,
        "PRIME_HUB_URL": hub["url"],
        "PRIME_API_KEY": token or "",
        "PRIME_CONFIG_DIR": str(cwd or ".") + "/.prime",
    }
    if token is None:
        env.pop("PRIME_API_KEY")
    result = subprocess.run(
        [sys.executable, "-m", "hub_client.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check:
        assert result.returncode == 0, f"prime {' '.join(args)}:\n{result.stdout}\n{result.stderr}"
    return result


def scaffold(tmp_path, name):
    from verifiers.cli.scaffold import scaffold as make

    return make(name, tmp_path / "envs")


def built(tmp_path, root) -> tuple[Path, Path]:
    from hub_client.commands_env import build

    out = tmp_path / f"dist-{root.name}"
    out.mkdir(exist_ok=True)
    return build(root, out)


# --- end to end ------------------------------------------------------------------------------------------


def fresh_venv(path: Path) -> Path:
    from uv import find_uv_bin

    subprocess.run(
        [find_uv_bin(), "venv", "--python", sys.executable, str(path)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            find_uv_bin(),
            "pip",
            "install",
            "--python",
            str(path / "bin" / "python"),
            "-e",
            f"{REPO}[server]",
        ],
        check=True,
        capture_output=True,
    )
    return path / "bin" / "python"


def installed_version(python: Path, dist: str) -> str:
    return subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def adder(request):
    match = re.search(r"What is (\d+) \+ (\d+)\?", request["messages"][-1]["content"])
    return f"<answer>{int(match.group(1)) + int(match.group(2))}</answer>"


@pytest.mark.slow
def test_push_install_eval_upgrade_and_locked_replay(hub, server, tmp_path):
    token = new_user(hub, "alice")
    subprocess.run(
        [sys.executable, "-m", "verifiers.cli.init", "hub-adder", "-p", str(tmp_path / "envs")],
        check=True,
    )
    root = tmp_path / "envs" / "hub_adder"
    pushed = prime(hub, token, "env", "push", "--path", str(root), "--tag", "math", cwd=tmp_path)
    assert "README.md is still the vf-init template" in pushed.stderr
    python = fresh_venv(tmp_path / "venv-a")
    prime(
        hub,
        token,
        "env",
        "install",
        "alice/hub-adder@0.1.0",
        "--python",
        str(python),
        "--lock-file",
        "a.lock",
        cwd=tmp_path,
    )
    lock = json.loads((tmp_path / "a.lock").read_text())["environments"]
    assert [(e["owner"], e["name"], e["version"]) for e in lock] == [
        ("alice", "hub-adder", "0.1.0")
    ]
    assert installed_version(python, "hub-adder") == "0.1.0"
    (tmp_path / "a0.lock").write_text((tmp_path / "a.lock").read_text())

    server.set_handler(adder)
    result = subprocess.run(
        [
            str(python.parent / "vf-eval"),
            "alice/hub-adder",
            "-b",
            server.base_url,
            "-m",
            "scripted",
            "-n",
            "2",
            "-r",
            "1",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    run = next((tmp_path / "out" / "evals").glob("alice--hub-adder--scripted/*"))
    meta = json.loads((run / "metadata.json").read_text())
    assert (
        meta["env_id"] == "alice/hub-adder"
        and meta["env_version"] == "0.1.0"
        and meta["summary"]["avg_reward"] == pytest.approx(1.2)
    )

    version = HubClient(hub["url"]).version("alice", "hub-adder", "0.1.0")
    assert meta["env_content_hash"] == version.content_hash  # one definition, both sides
    prime(hub, token, "eval", "push", str(run), cwd=tmp_path)
    evals = HubClient(hub["url"]).evals("alice", "hub-adder", "0.1.0")
    assert len(evals) == 1 and evals[0].num_rollouts == 2 and evals[0].model == "scripted"
    again = prime(hub, token, "eval", "push", str(run), cwd=tmp_path, check=False)
    assert again.returncode != 0 and "already attached" in again.stdout + again.stderr
    other = tmp_path / "other-run"  # a run of another environment, pushed onto this one
    other.mkdir()
    (other / "results.jsonl").write_text((run / "results.jsonl").read_text())
    (other / "metadata.json").write_text(
        json.dumps({**meta, "env_id": "reverse-text", "run_id": "x1"})
    )
    wrong = prime(
        hub,
        token,
        "eval",
        "push",
        str(other),
        "--env",
        "alice/hub-adder@0.1.0",
        cwd=tmp_path,
        check=False,
    )
    assert (
        wrong.returncode != 0
        and "evaluated reverse-text, not alice/hub-adder 0.1.0" in wrong.stdout + wrong.stderr
    )
    (other / "metadata.json").write_text(
        json.dumps({**meta, "env_content_hash": "sha256:0", "run_id": "x2"})
    )
    edited = prime(hub, token, "eval", "push", str(other), cwd=tmp_path, check=False)
    assert (
        edited.returncode != 0 and "is not alice/hub-adder 0.1.0's" in edited.stdout + edited.stderr
    )
    assert len(HubClient(hub["url"]).evals("alice", "hub-adder", "0.1.0")) == 1

    prime(hub, token, "env", "push", "--path", str(root), "--bump", "patch", cwd=tmp_path)
    assert 'version = "0.1.1"' in (root / "pyproject.toml").read_text()
    prime(
        hub,
        token,
        "env",
        "install",
        "alice/hub-adder@latest",
        "--python",
        str(python),
        "--lock-file",
        "a.lock",
        cwd=tmp_path,
    )
    assert installed_version(python, "hub-adder") == "0.1.1"

    python_b = fresh_venv(tmp_path / "venv-b")
    prime(
        hub,
        token,
        "env",
        "install",
        "--locked",
        "--lock-file",
        "a0.lock",
        "--python",
        str(python_b),
        cwd=tmp_path,
    )
    assert installed_version(python_b, "hub-adder") == "0.1.0"

    tampered = json.loads((tmp_path / "a0.lock").read_text())
    tampered["environments"][0]["sha256"] = "0" * 64
    (tmp_path / "bad.lock").write_text(json.dumps(tampered))
    refused = prime(
        hub,
        token,
        "env",
        "install",
        "--locked",
        "--lock-file",
        "bad.lock",
        "--python",
        str(python_b),
        cwd=tmp_path,
        check=False,
    )
    assert refused.returncode == 1 and "refusing to install" in refused.stderr

    pulled = prime(
        hub,
        None,
        "env",
        "pull",
        "alice/hub-adder@0.1.0",
        "-d",
        str(tmp_path / "pulled"),
        cwd=tmp_path,
    )
    assert "extracted to" in pulled.stdout
    assert (tmp_path / "pulled" / "hub_adder-0.1.0" / "hub_adder.py").exists()


def test_push_of_an_existing_version_is_refused_with_advice(hub, tmp_path):
    token = new_user(hub, "carol")
    root = scaffold(tmp_path, "carol-env")
    prime(hub, token, "env", "push", "--path", str(root), cwd=tmp_path)
    again = prime(hub, token, "env", "push", "--path", str(root), cwd=tmp_path, check=False)
    assert (
        again.returncode == 1
        and "already published" in again.stderr
        and "--bump patch" in again.stderr
    )


# --- security --------------------------------------------------------------------------------------------


def publish_raw(
    hub, token, owner, name, wheel: tuple[str, bytes], sdist: tuple[str, bytes] | None = None
) -> httpx.Response:
    files = {"wheel": (wheel[0], wheel[1])}
    if sdist:
        files["sdist"] = (sdist[0], sdist[1])
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(
        f"{hub['url']}/api/v1/environments/{owner}/{name}/versions",
        files=files,
        headers=headers,
        timeout=60,
    )


def make_wheel(
    name="evil-env",
    version="1.0.0",
    extra: list[tuple[zipfile.ZipInfo | str, bytes]] | None = None,
    meta_name=None,
) -> tuple[str, bytes]:
    buf = io.BytesIO()
    dist = name.replace("-", "_")
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{dist}.py", "def load_environment(): pass\n")
        z.writestr(
            f"{dist}-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {meta_name or name}\nVersion: {version}\n",
        )
        z.writestr(f"{dist}-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\n")
        for info, data in extra or []:
            z.writestr(info, data)
    return f"{dist}-{version}-py3-none-any.whl", buf.getvalue()


def error_code(resp: httpx.Response) -> str:
    return resp.json()["error"]["code"]


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
    changed = make_wheel("frank-env", extra=[("frank_env_extra.py", b"x = 1")])
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


def test_private_environments_are_invisible_to_others(hub):
    gina, hal = new_user(hub, "gina"), new_user(hub, "hal")
    resp = httpx.post(
        f"{hub['url']}/api/v1/environments/gina/secret-env/versions",
        files={"wheel": make_wheel("secret-env")},
        data={"visibility": "private"},
        headers={"Authorization": f"Bearer {gina}"},
    )
    assert resp.status_code == 201
    assert HubClient(hub["url"], gina).environment("gina", "secret-env").visibility == "private"
    for token in (None, hal):
        with pytest.raises(HubAPIError) as excinfo:
            HubClient(hub["url"], token).environment("gina", "secret-env")
        assert excinfo.value.code == "environment_not_found"
        assert "secret-env" not in [
            e.name for e in HubClient(hub["url"], token).list_environments().items
        ]
    assert httpx.get(f"{hub['url']}/simple/gina/secret-env/secret-env/").status_code == 404
    assert (
        httpx.get(
            f"{hub['url']}/simple/gina/secret-env/secret-env/", auth=("__token__", gina)
        ).status_code
        == 200
    )


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


def test_simple_index_standards_and_yanking(hub):
    lee = new_user(hub, "lee")
    for version in ("1.0.0", "1.1.0", "2.0.0rc1"):
        assert (
            publish_raw(hub, lee, "lee", "idx-env", make_wheel("idx-env", version)).status_code
            == 201
        )
    client = HubClient(hub["url"], lee)
    assert (
        client.version("lee", "idx-env", "latest").version == "1.1.0"
    )  # pre-releases only when asked
    client.yank("lee", "idx-env", "1.1.0", "broken scorer")
    assert client.version("lee", "idx-env", "latest").version == "1.0.0"
    page = httpx.get(
        f"{hub['url']}/simple/lee/idx-env/idx-env/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    ).json()
    assert page["meta"]["api-version"] == "1.1" and page["versions"] == [
        "1.0.0",
        "1.1.0",
        "2.0.0rc1",
    ]
    by_version = {f["filename"].split("-")[1]: f for f in page["files"]}
    assert (
        by_version["1.1.0"]["yanked"] == "broken scorer" and by_version["1.0.0"]["yanked"] is False
    )
    first = by_version["1.0.0"]
    assert first["upload-time"].endswith("Z") and len(first["hashes"]["sha256"]) == 64
    assert first["url"].startswith("/files/")  # path-absolute: pages never embed the Host header
    metadata = httpx.get(hub["url"] + first["url"] + ".metadata").content
    assert hashlib.sha256(metadata).hexdigest() == first["core-metadata"]["sha256"]
    assert b"Name: idx-env" in metadata
    html = httpx.get(f"{hub['url']}/simple/lee/idx-env/idx-env/").text
    assert (
        'data-yanked="broken scorer"' in html
        and "#sha256=" in html
        and "data-core-metadata=" in html
    )
    assert (
        httpx.get(f"{hub['url']}/simple/lee/idx-env/requests/").status_code == 404
    )  # no other project here


def test_search_listing_and_openapi(hub):
    mia = new_user(hub, "mia")
    for name, tags in (("alpha-env", ["games"]), ("beta-env", ["math"])):
        resp = httpx.post(
            f"{hub['url']}/api/v1/environments/mia/{name}/versions",
            files={"wheel": make_wheel(name)},
            data={"tags": json.dumps(tags)},
            headers={"Authorization": f"Bearer {mia}"},
        )
        assert resp.status_code == 201
    client = HubClient(hub["url"])
    assert [e.name for e in client.list_environments(owner="mia", sort="name").items] == [
        "alpha-env",
        "beta-env",
    ]
    assert [e.name for e in client.list_environments(tag="math", owner="mia").items] == ["beta-env"]
    assert [e.name for e in client.list_environments(q="alpha").items] == ["alpha-env"]
    page = client.list_environments(owner="mia", per_page=1, page=2, sort="name")
    assert page.total == 2 and [e.name for e in page.items] == ["beta-env"]
    assert (
        "/api/v1/environments/{owner}/{name}/versions"
        in httpx.get(f"{hub['url']}/openapi.json").json()["paths"]
    )


def test_search_is_never_stale_across_processes_and_counts_only_what_a_viewer_sees(hub):
    """Searches are cached per process under the catalog's generation: a publish, a visibility
    change or a delete made through another hub process shows in this one's next search. The
    count (read from the search index alone) never includes what the viewer may not see."""
    sora, ugo = new_user(hub, "sora"), new_user(hub, "ugo")

    def push(url, name, visibility="public"):
        resp = httpx.post(
            f"{url}/api/v1/environments/sora/{name}/versions",
            files={"wheel": make_wheel(name)},
            data={"visibility": visibility, "description": "zebra crossings"},
            headers={"Authorization": f"Bearer {sora}"},
        )
        assert resp.status_code == 201, resp.text

    def found(url, token=None):
        page = HubClient(url, token).list_environments(q="zebra", sort="name")
        return page.total, [e.name for e in page.items]

    push(hub["url"], "zebra-one")
    assert found(hub["url"]) == (1, ["zebra-one"])
    assert found(hub["url"]) == (1, ["zebra-one"])  # now answered from the cache
    with start_hub(hub["data"], backend=hub["backend"].flags) as second:
        push(second.url, "zebra-two")
        push(second.url, "zebra-hidden", visibility="private")
        assert found(hub["url"]) == (2, ["zebra-one", "zebra-two"])
        assert found(hub["url"], ugo) == (2, ["zebra-one", "zebra-two"])
        assert found(hub["url"], sora) == (3, ["zebra-hidden", "zebra-one", "zebra-two"])
        HubClient(second.url, sora).delete("sora", "zebra-one")
        assert found(hub["url"]) == (1, ["zebra-two"])
        assert found(hub["url"], sora) == (2, ["zebra-hidden", "zebra-two"])


def test_the_search_fast_path_answers_like_the_route(hub):
    """Whatever the route would refuse is refused the same way (the fast path hands it over)."""
    base = f"{hub['url']}/api/v1/environments"
    for query, status, code in (
        ("?page=abc", 422, "invalid_request"),
        ("?q=" + "x" * 201, 422, "invalid_request"),
        ("?sort=bogus", 400, "invalid_sort"),
    ):
        resp = httpx.get(base + query)
        assert resp.status_code == status and error_code(resp) == code, (query, resp.text)
    clamped = httpx.get(base + "?per_page=1000&page=-3").json()
    assert clamped["per_page"] == 100 and clamped["page"] == 1
    bad_token = httpx.get(base, headers={"Authorization": "Bearer not-a-token"})
    assert bad_token.status_code == 401 and error_code(bad_token)


def test_unknown_routes_and_methods_answer_with_stable_codes(hub):
    missing = httpx.get(f"{hub['url']}/api/v1/nothing-here")
    assert missing.status_code == 404 and error_code(missing) == "not_found"
    wrong = httpx.put(
        f"{hub['url']}/api/v1/environments", headers={"Authorization": f"Bearer {hub['admin']}"}
    )
    assert wrong.status_code == 405 and error_code(wrong) == "method_not_allowed"


def test_an_admin_users_first_token_says_it_holds_admin(hub):
    created = HubClient(hub["url"], hub["admin"]).create_user("second-admin", is_admin=True)
    assert created.scopes == ["admin", "publish", "read"]
    assert HubClient(hub["url"], created.token).me().is_admin


def test_login_stores_the_token_privately(hub, tmp_path):
    token = new_user(hub, "ned")
    env = {**os.environ, "PRIME_CONFIG_DIR": str(tmp_path / "cfg")}
    env.pop("PRIME_API_KEY", None)
    env.pop("PRIME_HUB_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "hub_client.cli", "login", "--url", hub["url"], "--token", token],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    config = tmp_path / "cfg" / "config.toml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600 and token in config.read_text()
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "hub_client.cli",
            "login",
            "--url",
            hub["url"],
            "--token",
            "vfh_nope",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "invalid_token" in bad.stderr


def test_version_bumps_follow_pep_440_and_touch_only_project_version(tmp_path):
    assert [bump("1.2.3", k) for k in ("major", "minor", "patch", "rc", "post")] == [
        "2.0.0",
        "1.3.0",
        "1.2.4",
        "1.2.4rc1",
        "1.2.3.post1",
    ]
    assert (
        bump("1.2.4rc1", "rc") == "1.2.4rc2"
        and bump("1.2.4rc2", "patch") == "1.2.4"
        and bump("1.2.3.post1", "post") == "1.2.3.post2"
    )
    assert bump("1!1.0", "patch") == "1!1.0.1" and bump("1.2.3a1", "rc") == "1.2.3rc1"
    from packaging.version import Version

    for version in ("1!1.0", "1.2.3a1", "2.0.0rc1", "1.0.dev1", "1.2.3b2", "0.1", "1.2.3.post1"):
        for kind in ("major", "minor", "patch", "rc", "post"):
            assert Version(bump(version, kind)) > Version(version), (version, kind)
    text = '[project]\nname = "x"\nversion = "0.1.0"\n\n[tool.other]\nversion = "9.9.9"\n'
    (tmp_path / "pyproject.toml").write_text(text)
    set_version(tmp_path, "0.1.1")
    assert (tmp_path / "pyproject.toml").read_text() == text.replace(
        'version = "0.1.0"', 'version = "0.1.1"'
    )


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


def test_a_tampered_stored_file_fails_the_install(hub, tmp_path):
    from hub_client.install import EnvSpec, InstallError, install

    quinn = new_user(hub, "quinn")
    root = scaffold(tmp_path, "tamper-env")
    wheel, sdist = built(tmp_path, root)
    info = HubClient(hub["url"], quinn).publish("quinn", "tamper-env", wheel, sdist)
    sha = next(f.sha256 for f in info.files if f.kind == "wheel")
    # a valid wheel of the same name and version, with other code in it: only the hash can tell
    module = root / "tamper_env.py"
    module.write_text(module.read_text() + "\nimport os  # injected\n")
    (tmp_path / "evil").mkdir()
    evil_wheel, _ = built(tmp_path / "evil", root)
    original = hub["backend"].replace_blob(hub["data"], sha, evil_wheel.read_bytes())
    try:
        with pytest.raises(InstallError, match=r"(?i)hash"):
            install(
                HubClient(hub["url"], quinn),
                [EnvSpec.parse("quinn/tamper-env@0.1.0")],
                tmp_path / "t.lock",
                python=str(fresh_venv(tmp_path / "venv-t")),
            )
    finally:
        hub["backend"].replace_blob(hub["data"], sha, original)
    assert not (tmp_path / "t.lock").exists()


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
                        make_wheel("busy-env", "3.0.0", extra=[(f"f{i}.py", b"x")]),
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
    name, wheel = make_wheel("half-env", extra=[("big.bin", os.urandom(4 * 1024 * 1024))])
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
    time.sleep(0.3)
    server.kill()
    sock.close()
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


@pytest.mark.slow
def test_hub_install_and_locked_replay_keep_this_sdk_when_the_environment_pins_verifiers(
    hub, tmp_path
):
    token = new_user(hub, "pinner")
    subprocess.run(
        [sys.executable, "-m", "verifiers.cli.init", "old-pin", "-p", str(tmp_path / "envs")],
        check=True,
    )
    root = tmp_path / "envs" / "old_pin"
    pyproject = root / "pyproject.toml"
    text = pyproject.read_text()
    start = text.index("dependencies = [")
    end = text.index("]", start) + 1
    pyproject.write_text(text[:start] + 'dependencies = ["verifiers==0.1.5"]' + text[end:])
    prime(hub, token, "env", "push", "--path", str(root), cwd=tmp_path)
    python = fresh_venv(tmp_path / "venv")
    for args in (["pinner/old-pin@0.1.0"], ["--locked"]):
        result = prime(
            hub,
            token,
            "env",
            "install",
            *args,
            "--python",
            str(python),
            "--lock-file",
            "e.lock",
            cwd=tmp_path,
        )
        assert "'verifiers==0.1.5' is satisfied by this SDK" in result.stderr
        where = subprocess.run(
            [str(python), "-c", "import verifiers; print(verifiers.__file__)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert Path(where).resolve().is_relative_to(REPO)
    (entry,) = json.loads((tmp_path / "e.lock").read_text())["environments"]
    assert entry["verifiers_requirement"] == "verifiers==0.1.5" and entry["sdk_version"]


@pytest.mark.slow
def test_a_second_machine_installs_this_sdk_from_the_hub_then_an_environment(hub, server, tmp_path):
    """The documented second-machine path, as a user types it: a fresh virtualenv, the SDK's
    own wheel from the hub by its pinned URL (never PyPI's unrelated ``verifiers``), then
    ``prime env install`` and ``vf-eval`` from that virtualenv."""
    from uv import find_uv_bin

    deadline = time.monotonic() + 300  # the hub builds its SDK wheel in the background at start
    while (resp := httpx.get(f"{hub['url']}/sdk/")).status_code != 200:
        assert time.monotonic() < deadline and "being built" in resp.text, resp.text
        time.sleep(0.5)
    info = resp.json()
    assert info["version"] == installed_version(Path(sys.executable), "verifiers")
    assert info["install"] == (f'pip install "verifiers @ {info["url"]}#sha256={info["sha256"]}"')
    wheel = httpx.get(info["url"]).content
    assert hashlib.sha256(wheel).hexdigest() == info["sha256"]
    assert httpx.get(f"{hub['url']}/sdk/verifiers-9.9.9-py3-none-any.whl").status_code == 404

    venv = tmp_path / "second-machine"
    subprocess.run(
        [find_uv_bin(), "venv", "--seed", "--python", sys.executable, str(venv)],
        check=True,
        capture_output=True,
    )
    python = venv / "bin" / "python"
    assert info["local_models"] == "python -m verifiers.local_model.stack"  # not run: no model here
    # the documented command, as the hub prints it
    core = info["install"].removeprefix("pip install ").strip('"')
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", core], check=True, timeout=600)
    where = subprocess.run(
        [str(python), "-c", "import verifiers; print(verifiers.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,  # not this checkout's directory, which python -c would import from
    ).stdout.strip()
    assert where.startswith(str(venv)), where  # the hub's wheel, not this checkout
    assert installed_version(python, "verifiers") == info["version"]

    token = new_user(hub, "remote")
    prime(
        hub,
        token,
        "env",
        "push",
        "--path",
        str(REPO / "environments" / "reverse_text"),
        cwd=tmp_path,
    )
    env = {
        **os.environ,
        "PRIME_HUB_URL": hub["url"],
        "PRIME_API_KEY": token,
        "PRIME_CONFIG_DIR": str(tmp_path / ".prime"),
    }
    installed = subprocess.run(
        [
            str(venv / "bin" / "prime"),
            "env",
            "install",
            "remote/reverse-text",
            "--python",
            str(python),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    server.set_handler(lambda request: "<answer>olleh</answer>")
    result = subprocess.run(
        [
            str(venv / "bin" / "vf-eval"),
            "remote/reverse-text",
            "-b",
            server.base_url,
            "-m",
            "scripted",
            "-n",
            "2",
            "-r",
            "1",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "out" / "evals").glob("remote--reverse-text--scripted/*")
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["env_id"] == "remote/reverse-text" and meta["summary"]["num_rollouts"] == 2


def test_a_dataset_made_from_a_versions_rollouts_attaches_to_that_version(hub, server, tmp_path):
    """vf-eval on the installed (editable) environment, vf-data, then prime data push: the
    runs' content hash is the pushed version's, so the dataset attaches there, once."""
    token = new_user(hub, "dana")
    prime(
        hub, token, "env", "push", "--path", str(REPO / "environments" / "uppercase"), cwd=tmp_path
    )
    server.set_handler(lambda request: request["messages"][-1]["content"].split(": ", 1)[1].upper())
    evaluated = subprocess.run(
        [
            sys.executable,
            "-m",
            "verifiers.cli.eval",
            "uppercase",
            "-b",
            server.base_url,
            "-m",
            "scripted",
            "-n",
            "3",
            "-r",
            "2",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert evaluated.returncode == 0, evaluated.stderr
    (run,) = (tmp_path / "out" / "evals").glob("uppercase--scripted/*")
    meta = json.loads((run / "metadata.json").read_text())
    assert (
        meta["env_content_hash"]
        == HubClient(hub["url"]).version("dana", "uppercase", "0.1.0").content_hash
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "verifiers.cli.data",
            str(run),
            "-o",
            str(tmp_path / "data"),
            "--best-of-n",
        ],
        check=True,
        capture_output=True,
    )
    pushed = prime(
        hub,
        token,
        "data",
        "push",
        str(tmp_path / "data"),
        "--env",
        "dana/uppercase@0.1.0",
        cwd=tmp_path,
    )
    assert "uploaded dataset #" in pushed.stdout and "(3 rows)" in pushed.stdout
    again = prime(
        hub,
        token,
        "data",
        "push",
        str(tmp_path / "data"),
        "--env",
        "dana/uppercase@0.1.0",
        cwd=tmp_path,
        check=False,
    )
    assert again.returncode != 0 and "already attached" in again.stdout + again.stderr
    (listed,) = HubClient(hub["url"]).datasets("dana", "uppercase", "0.1.0")
    assert listed.rows == 3 and listed.models == ["scripted"] and "best of n" in listed.filter
    parquet = httpx.get(listed.url).content
    assert parquet.startswith(b"PAR1") and hashlib.sha256(parquet).hexdigest() == listed.sha256
    stranger = new_user(hub, "data-stranger")
    refused = prime(
        hub,
        stranger,
        "data",
        "push",
        str(tmp_path / "data"),
        "--env",
        "dana/uppercase@0.1.0",
        cwd=tmp_path,
        check=False,
    )
    assert refused.returncode != 0 and "only dana" in refused.stdout + refused.stderr


async def test_uploads_work_in_processes_that_yield_the_cpu_to_reads(tmp_path):
    """What the docs say of uploads: their work runs in worker processes of the hub's (its
    own interpreter lock, so pure-Python checks never take the loop's turn), at a lower CPU
    priority than the loop that answers reads; an error comes back whole."""
    from hub_server.errors import HubError
    from hub_server.hub import Hub
    from hub_server.upload_pool import UPLOAD_NICENESS, worker_identity

    hub = Hub(tmp_path)
    try:
        pid, parent, nice = await hub.upload_work(worker_identity)
        assert pid != os.getpid() and parent == os.getpid()
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
    from hub_server.errors import HubError
    from hub_server.hub import Hub
    from hub_server.upload_pool import worker_identity

    hub = Hub(tmp_path)
    try:
        first, _, _ = await hub.upload_work(worker_identity)
        with pytest.raises(HubError) as died:
            await hub.upload_work(die_in_worker)
        assert (died.value.status, died.value.code) == (503, "upload_worker_failed")
        again, parent, _ = await hub.upload_work(worker_identity)
        assert parent == os.getpid() and again != first
    finally:
        hub.close()


def die_in_worker(hub) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


async def test_uploads_are_admitted_as_many_at_once_as_there_are_workers(tmp_path):
    """A third push waits (before its body is read) while two are in the hub's hands."""
    import asyncio

    from hub_server.hub import Hub

    hub = Hub(tmp_path, upload_workers=2)
    admitted = asyncio.Event()

    async def third() -> None:
        async with hub.upload_slot():
            admitted.set()

    try:
        async with hub.upload_slot(), hub.upload_slot():
            waiting = asyncio.create_task(third())
            for _ in range(5):
                await asyncio.sleep(0)
            assert not admitted.is_set()
        await asyncio.wait_for(waiting, 5)
        assert admitted.is_set()
    finally:
        hub.close()


async def test_a_large_upload_reaches_its_worker_through_the_spool_and_leaves_nothing(tmp_path):
    """An upload spooled to disk (over the parser's in-memory size) is copied for the worker,
    read there whole, and the copy and its directory are gone after the work and the hub."""
    import hashlib
    import tempfile

    from hub_server.hub import Hub
    from hub_server.upload_pool import Upload

    payload = os.urandom(4096)
    spooled = tempfile.SpooledTemporaryFile(max_size=1024)
    spooled.write(payload)
    assert spooled._rolled  # on disk, as the parser leaves a large file
    hub = Hub(tmp_path)
    try:
        digest = await hub.upload_work(digest_in_worker, Upload("big.whl", spooled))
        assert digest == hashlib.sha256(payload).hexdigest()
        assert list((tmp_path / "upload-spool").glob("*/*")) == []
    finally:
        hub.close()
    assert list((tmp_path / "upload-spool").iterdir()) == []


def digest_in_worker(hub, upload) -> str:
    import hashlib

    return hashlib.sha256(upload.file.read()).hexdigest()
