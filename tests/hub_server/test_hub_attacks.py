"""Second-pass attacks on the hub (issue 20: the API in a browser, resource abuse by an
authenticated user), each followed by the legitimate action that must still work. A real hub
process on loopback, on both storage backends; real HTTP and the real `prime` CLI."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from support.hubs import error_code as code
from support.hubs import eval_files, publish, raw_request, user, wheel
from support.hubs import run_prime as prime

from hub_client.client import HubClient
from hub_server.process import start_hub

PAGE_FORM = "application/x-www-form-urlencoded"


@pytest.fixture(scope="module")
def hub(strict_hub):
    return strict_hub


def login_pair(hub) -> tuple[str, str]:
    """(cookie name, value) of a fresh sign-in form's CSRF token, as a browser would get it."""
    resp = httpx.get(f"{hub['url']}/login")
    (name, value), *_ = resp.cookies.items()
    return name, value


# --- the API in a browser -------------------------------------------------------------------------


def test_basic_credentials_publish_nothing_and_no_401_asks_a_browser_for_them(hub):
    """A browser replays cached Basic credentials on a cross-site multipart form post; the API
    takes Bearer only, and no 401 invites a browser to cache credentials at all."""
    name, token = user(hub)
    resp = httpx.post(
        f"{hub['url']}/api/v1/environments/{name}/basic-env/versions",
        files={"wheel": wheel("basic-env")},
        auth=("__token__", token),
    )
    assert resp.status_code == 401 and code(resp) == "bearer_required", resp.text
    for anonymous in (
        httpx.post(f"{hub['url']}/api/v1/teams", json={"name": "x"}),
        httpx.get(f"{hub['url']}/api/v1/me"),
    ):
        assert anonymous.status_code == 401 and "www-authenticate" not in anonymous.headers
    # legitimate: Bearer publishes; installers' Basic still reads a private index
    assert (
        publish(hub, token, name, "basic-env", wheel("basic-env"), visibility="private").status_code
        == 201
    )
    index = f"{hub['url']}/simple/{name}/basic-env/basic-env/"
    assert httpx.get(index).status_code == 404
    assert httpx.get(index, auth=("__token__", token)).status_code == 200


@pytest.mark.parametrize(
    "origin",
    ["null", None, "http://127.0.0.1:1", "http://evil.example"],
    ids=["null", "absent", "other-port", "other-site"],
)
def test_sign_in_forms_refuse_every_other_origin_even_with_a_planted_cookie(hub, origin):
    """Login CSRF: a page on another port (or a sandboxed frame, Origin: null) plants the CSRF
    cookie and posts the attacker's token; the victim must not end up signed in as them."""
    _, attacker = user(hub, "att")
    planted = "planted-by-another-port"
    cookies = {"vfh_login": planted, "vfh_csrf": planted}  # the new and the old cookie name
    headers = {"Content-Type": PAGE_FORM, **({"Origin": origin} if origin else {})}
    forged = httpx.post(
        f"{hub['url']}/login",
        data={"token": attacker, "csrf": planted},
        cookies=cookies,
        headers=headers,
    )
    assert forged.status_code == 403 and "vfh_session" not in forged.headers.get("set-cookie", "")
    # legitimate: the hub's own form, posted from its own origin, signs in
    name, value = login_pair(hub)
    signed_in = httpx.post(
        f"{hub['url']}/login",
        data={"token": attacker, "csrf": value},
        cookies={name: value},
        headers={"Content-Type": PAGE_FORM, "Origin": hub["url"]},
    )
    assert signed_in.status_code == 303 and "vfh_session=" in signed_in.headers["set-cookie"]


def test_signed_in_forms_need_the_token_derived_from_the_session(hub):
    """Signed in, a cookie planted from another port is worth nothing: the form's token is
    derived from the (HttpOnly) session."""
    _, token = user(hub)
    name, value = login_pair(hub)
    session = httpx.post(
        f"{hub['url']}/login",
        data={"token": token, "csrf": value},
        cookies={name: value},
        headers={"Content-Type": PAGE_FORM, "Origin": hub["url"]},
    ).cookies["vfh_session"]
    jar = {"vfh_session": session, "vfh_login": "planted", "vfh_csrf": "planted"}
    forged = httpx.post(
        f"{hub['url']}/logout",
        data={"csrf": "planted"},
        cookies=jar,
        headers={"Origin": hub["url"]},
    )
    assert forged.status_code == 403
    page = httpx.get(f"{hub['url']}/", cookies={"vfh_session": session}).text
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    out = httpx.post(
        f"{hub['url']}/logout", data={"csrf": csrf}, cookies=jar, headers={"Origin": hub["url"]}
    )
    assert out.status_code == 303


def test_pages_cannot_be_framed_by_another_site(hub):
    for path in ("/", "/login", "/e/nobody/nothing"):
        resp = httpx.get(hub["url"] + path)
        assert resp.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in resp.headers["content-security-policy"]
    assert "Environments Hub" in httpx.get(hub["url"] + "/").text  # the page itself still renders


def test_cookies_are_secure_and_host_bound_behind_a_trusted_tls_proxy(tmp_path, fresh_backend):
    """Behind a TLS proxy the hub sees plain HTTP; from a --trusted-proxy it believes
    X-Forwarded-Proto and sets Secure, __Host- cookies. Anyone else's header is ignored."""
    data = tmp_path / "hub"
    token = fresh_backend.create_user(data, "tls")
    proxy = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"))
    extra = ["--trusted-proxy", "127.0.0.2"]
    with start_hub(data, backend=fresh_backend.flags, extra=extra) as server:
        tls = {"X-Forwarded-Proto": "https"}
        form = proxy.get(f"{server.url}/login", headers=tls)
        assert form.headers["set-cookie"].startswith("__Host-vfh_login=")
        assert "secure" in form.headers["set-cookie"].lower()
        name, value = next(iter(form.cookies.items()))
        origin = server.url.replace("http://", "https://")
        signed_in = proxy.post(
            f"{server.url}/login",
            data={"token": token, "csrf": value},
            headers={**tls, "Origin": origin, "Cookie": f"{name}={value}"},
        )
        assert signed_in.status_code == 303, signed_in.text
        cookie = signed_in.headers["set-cookie"]
        assert cookie.startswith("__Host-vfh_session=") and "secure" in cookie.lower()
        spoofed = httpx.get(f"{server.url}/login", headers=tls)  # not from the proxy
        assert "secure" not in spoofed.headers["set-cookie"].lower()
        # HSTS on every answer over TLS, the fast paths' and refusals too; none in plain http
        # (a project's index page is answered ahead of the framework: once there too)
        index = ("/simple/tls/none/", "/simple/tls/none/none/")
        for path in ("/login", *index, "/api/v1/environments?q=x", "/api/v1/me"):
            over_tls = proxy.get(f"{server.url}{path}", headers=tls)
            hsts = over_tls.headers.get_list("strict-transport-security")
            assert len(hsts) == 1 and hsts[0].startswith("max-age="), (path, hsts)
            assert "strict-transport-security" not in spoofed.headers
        assert "strict-transport-security" not in httpx.get(f"{server.url}/login").headers


def test_links_never_follow_the_host_header(hub):
    name, token = user(hub)
    assert publish(hub, token, name, "link-env", wheel("link-env")).status_code == 201
    evil = {"Host": "evil.example"}
    version = httpx.get(
        f"{hub['url']}/api/v1/environments/{name}/link-env/versions/1.0.0", headers=evil
    )
    info = httpx.get(f"{hub['url']}/api/v1/environments/{name}/link-env", headers=evil)
    assert "evil" not in version.text and "evil" not in info.text
    assert version.json()["files"][0]["url"].startswith(hub["url"] + "/files/")  # still absolute


def test_a_hubs_sdk_install_line_is_its_own_url_not_the_host_header(tmp_path):
    from fastapi.testclient import TestClient

    from hub_server import HubSettings, create_app

    wheel_file = tmp_path / "verifiers-9.8.7-py3-none-any.whl"
    wheel_file.write_bytes(b"PK")
    settings = HubSettings(
        data_dir=tmp_path / "d", sdk_wheel=wheel_file, public_url="https://hub.example"
    )
    with TestClient(create_app(settings)) as client:
        info = client.get("/sdk/", headers={"Host": "evil.example"}).json()
    assert "evil" not in json.dumps(info) and info["url"].startswith("https://hub.example/sdk/")


class Recorder(BaseHTTPRequestHandler):
    seen: list[str | None] = []
    body = b""

    def do_GET(self):
        Recorder.seen.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def test_pull_sends_the_token_only_to_the_hubs_own_origin(hub):
    """A version's file URL on another host (a mirror, or a hub that lies) gets no token."""
    name, token = user(hub)
    elsewhere = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=elsewhere.serve_forever, daemon=True).start()
    Recorder.seen, Recorder.body = [], b"sdist bytes"
    client = HubClient(hub["url"], token)
    try:
        assert (
            client.download(f"http://127.0.0.1:{elsewhere.server_port}/x.tar.gz") == b"sdist bytes"
        )
        assert Recorder.seen == [None]
    finally:
        elsewhere.shutdown()
    # legitimate: the hub's own (private) files still download with the token
    assert (
        publish(hub, token, name, "own-env", wheel("own-env"), visibility="private").status_code
        == 201
    )
    (f,) = client.version(name, "own-env", "1.0.0").files
    assert client.download(f.url)[:2] == b"PK"


def test_prime_help_does_not_advertise_a_token_on_the_command_line(hub, tmp_path):
    for args in (["--help"], ["login", "--help"]):
        shown = subprocess.run(
            [sys.executable, "-m", "hub_client.cli", *args], capture_output=True, text=True
        ).stdout
        assert "--token" not in shown and "TOKEN" not in shown
    _, token = user(hub)  # legitimate: the token piped in
    env = {"PRIME_CONFIG_DIR": str(tmp_path / "cfg"), "PATH": "/usr/bin:/bin"}
    login = subprocess.run(
        [sys.executable, "-m", "hub_client.cli", "login", "--url", hub["url"]],
        input=token + "\n",
        capture_output=True,
        text=True,
        env=env,
    )
    assert login.returncode == 0 and "logged in" in login.stdout, login.stderr


# --- resource abuse by an authenticated user ------------------------------------------------------


def test_uploads_are_refused_on_their_headers_when_scope_or_namespace_is_wrong(hub):
    """A valid token aiming at someone else's namespace (or without publish) is refused before a
    byte of a 40 MiB body is sent, instead of after it was spooled."""
    victim, victim_token = user(hub, "vic")
    _, mallory = user(hub, "mal")
    read_only = HubClient(hub["url"], mallory).create_token("ro", ["read"]).token
    assert publish(hub, victim_token, victim, "target-env", wheel("target-env")).status_code == 201
    paths = [
        (mallory, f"/api/v1/environments/{victim}/target-env/versions", "not_owner"),
        (mallory, f"/api/v1/environments/{victim}/target-env/versions/1.0.0/evals", "not_owner"),
        (mallory, f"/api/v1/environments/{victim}/target-env/versions/1.0.0/datasets", "not_owner"),
        (read_only, f"/api/v1/environments/{victim}/target-env/versions", "insufficient_scope"),
    ]
    for token, path, expected in paths:  # expected: the code a full request gets
        head = (
            f"POST {path} HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: {40 * 1024 * 1024}\r\n\r\n"
        )
        start = time.monotonic()
        reply = raw_request(hub["url"], head, wait=10)  # no body at all
        assert reply.startswith(b"HTTP/1.1 403"), (expected, reply[:300])
        assert time.monotonic() - start < 1.5  # answered on the headers, not after a read timeout
    assert (
        publish(hub, victim_token, victim, "target-env", wheel("target-env", "1.1.0")).status_code
        == 201
    )


def published(hub, env: str) -> tuple[str, str, dict]:
    name, token = user(hub)
    assert publish(hub, token, name, env, wheel(env)).status_code == 201
    version = httpx.get(f"{hub['url']}/api/v1/environments/{name}/{env}/versions/1.0.0").json()
    return name, token, version


def test_an_eval_summary_is_recomputed_from_its_results_and_bad_numbers_are_refused(hub):
    name, token, version = published(hub, "numbers-env")
    url = f"{hub['url']}/api/v1/environments/{name}/numbers-env/versions/1.0.0/evals"
    auth = {"Authorization": f"Bearer {token}"}
    lying = eval_files(version, "lie", [0.0, 0.0], summary={"avg_reward": 1.0, "num_errors": 0})
    resp = httpx.post(url, files=lying, headers=auth)
    assert resp.status_code == 201 and resp.json()["summary"]["avg_reward"] == 0.0
    for bad in (
        '{"example_id": 0, "reward": NaN}',
        '{"example_id": 0, "reward": "high"}',
        '{"reward": 1e999}',
        "[1]",
    ):
        refused = httpx.post(
            url, files=eval_files(version, f"bad{uuid.uuid4().hex}", [bad]), headers=auth
        )
        assert refused.status_code == 400 and code(refused) == "invalid_eval", refused.text
    page = httpx.get(f"{hub['url']}/e/{name}/numbers-env")
    assert page.status_code == 200 and "reward <b>0.0000</b>" in page.text  # and it renders
    old = httpx.post(url, files=eval_files(version, "old", [0.5]), headers=auth)
    hub["backend"].execute(  # a row stored before these checks, holding anything (written
        hub["data"],  # before the page shows it: the hub itself never rewrites an eval)
        "UPDATE evals SET summary=?, histogram=? WHERE id=?",
        (
            '{"avg_reward": "NaN", "pass_at_k": {"1": "x"}, "num_errors": null}',
            "{",
            old.json()["id"],
        ),
    )
    page = httpx.get(f"{hub['url']}/e/{name}/numbers-env")
    assert page.status_code == 200 and "reward <b>-</b>" in page.text
    assert "reward <b>0.0000</b>" in page.text


@pytest.mark.slow
def test_the_evals_quota_holds_under_concurrent_uploads(hub):
    name, token, version = published(hub, "quota-env")
    url = f"{hub['url']}/api/v1/environments/{name}/quota-env/versions/1.0.0/evals"
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(headers=auth) as http:
        for i in range(190):
            assert http.post(url, files=eval_files(version, f"r{i}", [1.0])).status_code == 201
    with ThreadPoolExecutor(16) as pool:
        codes = list(
            pool.map(
                lambda i: (
                    httpx.post(
                        url, files=eval_files(version, f"c{i}", [1.0]), headers=auth
                    ).status_code
                ),
                range(30),
            )
        )
    assert codes.count(201) == 10 and codes.count(403) == 20
    assert len(HubClient(hub["url"]).evals(name, "quota-env", "1.0.0")) == 200


def parquet_bytes(
    rows: int, value: str = "x", encoding: str = "plain", small_first: int = 0
) -> bytes:
    """``encoding``: ``plain``, ``dictionary`` (a dictionary-typed column: Arrow keeps each
    value once, whoever reads the rows gets it repeated), ``nested-dictionary`` (the same
    inside a list) or ``list-view-dictionary`` (inside a list view, whose rows share it).
    ``small_first`` rows of ``"x"`` come before the others (the hub sizes its decode batches
    from the first rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # each value once, indexed per row: building the rows themselves (600 MiB) took 10-20 s
    indices = pa.array([1] * small_first + [0] * (rows - small_first), pa.int32())
    column = pa.DictionaryArray.from_arrays(indices, pa.array([value, "x"]))
    if encoding == "nested-dictionary":
        column = pa.ListArray.from_arrays(pa.array(range(rows + 1), pa.int32()), column)
    if encoding == "list-view-dictionary":  # every row a view of the same one value
        starts = pa.array([0] * rows, pa.int32())
        column = pa.ListViewArray.from_arrays(starts, pa.array([1] * rows, pa.int32()), column)
    buf = io.BytesIO()  # without Arrow's schema, a plain file's readers see strings
    pq.write_table(
        pa.table({"text": column}), buf, compression="zstd", store_schema=encoding != "plain"
    )
    return buf.getvalue()


def dataset_files(version: dict, data: bytes, rows: int) -> dict:
    card = {
        "rows": rows,
        "filter": {"kind": "all"},
        "sources": [
            {
                "env_id": version["name"],
                "env_version": version["version"],
                "env_content_hash": version["content_hash"],
                "run_id": "r",
                "model": "m",
            }
        ],
    }
    return {"card": ("vf_data.json", json.dumps(card).encode()), "data": ("data.parquet", data)}


@pytest.mark.slow
def test_datasets_are_capped_in_number_and_in_decoded_size(hub):
    name, token, version = published(hub, "data-env")
    url = f"{hub['url']}/api/v1/environments/{name}/data-env/versions/1.0.0/datasets"
    auth = {"Authorization": f"Bearer {token}"}
    mib = "a" * 1024 * 1024
    for encoding, small_first, status, expected in (  # each 600 MiB once its rows are read
        ("plain", 0, 413, "dataset_too_large"),
        ("plain", 16, 413, "dataset_too_large"),  # batches sized for tiny rows: one of 600 MiB
        ("dictionary", 0, 413, "dataset_too_large"),
        ("nested-dictionary", 0, 413, "dataset_too_large"),
        ("list-view-dictionary", 0, 400, "invalid_dataset"),  # no cast undoes it: refused as is
    ):
        bomb = parquet_bytes(600 + small_first, mib, encoding, small_first)
        assert len(bomb) < 2 * 1024 * 1024
        refused = httpx.post(
            url, files=dataset_files(version, bomb, 600 + small_first), headers=auth, timeout=120
        )
        assert refused.status_code == status, (encoding, small_first, refused.text)
        assert code(refused) == expected, (encoding, small_first, refused.text)
    lying = httpx.post(url, files=dataset_files(version, parquet_bytes(3), 5), headers=auth)
    assert lying.status_code == 400 and code(lying) == "invalid_dataset"
    for i in range(19):  # legitimate datasets attach, up to the cap (dictionary columns too)
        data = parquet_bytes(i + 1, encoding=("plain", "dictionary", "nested-dictionary")[i % 3])
        resp = httpx.post(url, files=dataset_files(version, data, i + 1), headers=auth)
        assert resp.status_code == 201, resp.text
    mixed = parquet_bytes(40, mib, small_first=16)  # 24 MiB of rows after 16 tiny ones
    resp = httpx.post(url, files=dataset_files(version, mixed, 40), headers=auth)
    assert resp.status_code == 201, resp.text
    over = httpx.post(url, files=dataset_files(version, parquet_bytes(99), 99), headers=auth)
    assert over.status_code == 403 and code(over) == "dataset_quota"


def team_with_member(hub) -> tuple[str, HubClient, str, str, str]:
    """A new team: its name, its owner's client and token, and a plain member's name and token."""
    _, owner = user(hub, "own")
    member_name, member = user(hub, "mem")
    team = f"team{uuid.uuid4().hex[:8]}"
    admin = HubClient(hub["url"], owner)
    admin.create_team(team)
    admin.add_team_member(team, member_name)
    return team, admin, owner, member_name, member


def test_a_team_member_can_be_removed_and_may_publish_but_not_yank(hub):
    team, admin, owner, member_name, member = team_with_member(hub)
    assert publish(hub, member, team, "crew-env", wheel("crew-env")).status_code == 201
    yank = httpx.post(
        f"{hub['url']}/api/v1/environments/{team}/crew-env/versions/1.0.0/yank",
        json={"reason": "mine now"},
        headers={"Authorization": f"Bearer {member}"},
    )
    assert yank.status_code == 403 and code(yank) == "not_owner"
    assert admin.yank(team, "crew-env", "1.0.0", "owner's call").yanked  # the owner yanks
    removed = httpx.delete(
        f"{hub['url']}/api/v1/teams/{team}/members/{member_name}",
        headers={"Authorization": f"Bearer {owner}"},
    )
    assert removed.status_code == 204
    after = publish(hub, member, team, "crew-env", wheel("crew-env", "2.0.0"))
    assert after.status_code == 403 and code(after) == "not_owner"
    owner_name = admin.me().user
    last = httpx.delete(
        f"{hub['url']}/api/v1/teams/{team}/members/{owner_name}",
        headers={"Authorization": f"Bearer {owner}"},
    )
    assert last.status_code == 409 and code(last) == "last_owner"


def test_a_team_member_cannot_change_an_environments_visibility_but_still_publishes(hub):
    """A plain member may publish but not yank or delete: an outside attack had one make the
    team's private environment public (every version and file to everyone) with a push's
    `--visibility public` (Prime's staged push passes the same service: test_official_prime.py).
    Now refused; a push that keeps the visibility, or names the one it has, publishes, and the
    team's owner changes it."""
    team, _, owner, _, member = team_with_member(hub)
    made = publish(hub, owner, team, "quiet-env", wheel("quiet-env"), visibility="private")
    assert made.status_code == 201, made.text
    flip = publish(hub, member, team, "quiet-env", wheel("quiet-env", "1.1.0"), visibility="public")
    assert flip.status_code == 403 and code(flip) == "not_owner", flip.text
    assert "visibility" in flip.json()["error"]["message"]
    assert httpx.get(f"{hub['url']}/api/v1/environments/{team}/quiet-env").status_code == 404
    assert httpx.get(f"{hub['url']}/simple/{team}/quiet-env/").status_code == 404
    kept = publish(hub, member, team, "quiet-env", wheel("quiet-env", "1.1.0"))
    assert kept.status_code == 201, kept.text
    named = publish(
        hub, member, team, "quiet-env", wheel("quiet-env", "1.2.0"), visibility="private"
    )
    assert named.status_code == 201, named.text
    opened = publish(
        hub, owner, team, "quiet-env", wheel("quiet-env", "1.3.0"), visibility="public"
    )
    assert opened.status_code == 201, opened.text
    shown = httpx.get(f"{hub['url']}/api/v1/environments/{team}/quiet-env")
    assert shown.status_code == 200 and shown.json()["latest_version"] == "1.3.0"


def test_anonymous_downloads_do_not_move_rank_and_a_user_counts_once_a_day(hub):
    name, token = user(hub)
    for env in ("rank-a", "rank-b"):
        assert publish(hub, token, name, env, wheel(env)).status_code == 201
    file_url = f"{hub['url']}/files/{name}/rank-b/rank_b-1.0.0-py3-none-any.whl"
    with httpx.Client() as anonymous:
        for _ in range(50):
            assert anonymous.get(file_url).status_code == 200
    _, reader = user(hub, "reader")
    for _ in range(3):
        assert httpx.get(file_url, headers={"Authorization": f"Bearer {reader}"}).status_code == 200
    # counts are written in batches: at least every 10 s, and when this process lists
    listing = HubClient(hub["url"]).list_environments(owner=name, sort="downloads")
    assert [e.name for e in listing.items] == ["rank-b", "rank-a"]
    page = httpx.get(f"{hub['url']}/e/{name}/rank-b").text
    assert "1 download " in page or "1 download<" in page, "one user, one day: one download"


def test_a_connection_with_half_sent_headers_is_closed_after_the_read_timeout(hub):
    host, port = hub["url"].removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=15) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: h\r\nX-Slow: ")
        start = time.monotonic()
        assert sock.recv(1024) == b""  # closed by the hub
        assert time.monotonic() - start < 6  # PRIME_HUB_READ_TIMEOUT is 2 s for this hub
    assert httpx.get(hub["url"] + "/health").status_code == 200


def test_eval_push_prints_hub_strings_without_terminal_control(hub, tmp_path):
    name, token, version = published(hub, "echo-env")
    run = tmp_path / "run"
    run.mkdir()
    files = eval_files(version, "echo", [1.0], model="\x1b]0;pwned\x07\x1b[2J[red]fake[/red]")
    (run / "metadata.json").write_bytes(files["metadata"][1])
    (run / "results.jsonl").write_bytes(files["results"][1])
    pushed = prime(
        hub, token, "eval", "push", str(run), "--env", f"{name}/echo-env@1.0.0", cwd=tmp_path
    )
    assert pushed.returncode == 0, pushed.stderr
    assert "\x1b" not in pushed.stdout and "[red]fake[/red]" in pushed.stdout


def test_expired_sessions_are_purged_when_someone_signs_in(hub):
    _, token = user(hub)
    for _ in range(2):
        name, value = login_pair(hub)
        signed_in = httpx.post(
            f"{hub['url']}/login",
            data={"token": token, "csrf": value},
            cookies={name: value},
            headers={"Origin": hub["url"]},
        )
        assert signed_in.status_code == 303
    hub["backend"].execute(hub["data"], "UPDATE sessions SET expires_at='2000-01-01T00:00:00Z'")
    name, value = login_pair(hub)
    fresh = httpx.post(
        f"{hub['url']}/login",
        data={"token": token, "csrf": value},
        cookies={name: value},
        headers={"Origin": hub["url"]},
    )
    assert fresh.status_code == 303
    rows = hub["backend"].query(hub["data"], "SELECT expires_at FROM sessions")
    assert len(rows) == 1 and rows[0]["expires_at"] > "2001"


def test_the_sdk_wheel_is_never_built_on_a_request(tmp_path):
    from fastapi.testclient import TestClient

    from hub_server import HubSettings, create_app

    settings = HubSettings(data_dir=tmp_path / "d", public_url="http://hub.test", build_sdk=False)
    with TestClient(create_app(settings)) as client:
        for _ in range(3):
            resp = client.get("/sdk/")
            assert resp.status_code == 404 and resp.json()["error"]["code"] == "sdk_unavailable"
    assert not (tmp_path / "d" / "sdk").exists()


@pytest.mark.slow
def test_the_sdk_wheel_holds_only_files_git_tracks(tmp_path):
    """A hub run from a checkout builds its wheel from tracked files: a stray untracked module
    in the working tree (a note, a key, scratch code) never reaches other machines."""
    import zipfile

    from hub_server.services.sdk import SDKWheels, source_checkout

    root = source_checkout()
    if root is None or not (root / ".git").exists():
        pytest.skip("needs a git checkout")
    stray = root / "verifiers" / "zz_untracked_probe.py"
    stray.write_text("SECRET = 1\n")
    try:
        wheels = SDKWheels(tmp_path / "data")
        wheels.start()
        assert wheels.done.wait(600)
        names = zipfile.ZipFile(wheels.get().path).namelist()
    finally:
        stray.unlink()
    assert "verifiers/__init__.py" in names and "verifiers/zz_untracked_probe.py" not in names
