"""`prime` does exactly what was typed (issue 23): each command run as a user types it, against a
real hub process, on both storage backends."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support.hubs import publish, user, wheel

from hub_client.client import HubClient


@pytest.fixture(scope="module")
def hub(strict_hub):
    return strict_hub


def typed(*args: str, cwd, hub_url: str | None = None, token: str | None = None, timeout=120):
    """``prime ARGS`` in a fresh config dir, with only the hub and token given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRIME_")}
    env["PRIME_CONFIG_DIR"] = str(cwd / ".prime-config")
    if hub_url:
        env["PRIME_HUB_URL"] = hub_url
    if token:
        env["PRIME_API_KEY"] = token
    return subprocess.run(
        [sys.executable, "-m", "hub_client.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def bare_venv(path) -> str:
    """A fresh virtualenv that sees this SDK (through a .pth to this interpreter's packages)."""
    import site
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], *site.getsitepackages()])
    lines = [f"import site; site.addsitedir({path!r})" for path in ours]
    (Path(purelib) / "zz_this_sdk.pth").write_text("\n".join(lines) + "\n")
    return str(python)


def test_env_delete_at_a_version_deletes_only_that_version(hub, tmp_path):
    name, token = user(hub)
    for version in ("1.0.0", "1.1.0"):
        assert publish(hub, token, name, "del-env", wheel("del-env", version)).status_code == 201
    done = typed(
        "env",
        "delete",
        f"{name}/del-env@1.0.0",
        "--yes",
        cwd=tmp_path,
        hub_url=hub["url"],
        token=token,
    )
    assert done.returncode == 0, done.stderr
    assert f"deleted version 1.0.0 of {name}/del-env" in done.stdout
    assert [v.version for v in HubClient(hub["url"]).versions(name, "del-env")] == ["1.1.0"]
    again = publish(hub, token, name, "del-env", wheel("del-env", "1.0.0"))
    assert again.status_code == 409, "a deleted version's number is never reused"
    message = again.json()["error"]["message"]
    assert "was published and deleted" in message and "already published" not in message
    whole = typed(
        "env", "delete", f"{name}/del-env", "--yes", cwd=tmp_path, hub_url=hub["url"], token=token
    )
    assert whole.returncode == 0 and "every version" in whole.stdout
    assert httpx.get(f"{hub['url']}/api/v1/environments/{name}/del-env").status_code == 404
    # the whole environment's numbers stay retired: the same name@version and filename never
    # resolve to other bytes (deleting the environment cascaded them away); new ones publish
    for version in ("1.0.0", "1.1.0", "1.1"):
        other = wheel("del-env", version, extra=[("del_env/other.py", "x = 1\n")])
        reused = publish(hub, token, name, "del-env", other)
        assert reused.status_code == 409, (version, reused.text)
        assert "was published and deleted" in reused.json()["error"]["message"]
    fresh = publish(hub, token, name, "del_env", wheel("del_env", "1.0.0"))  # another spelling
    assert fresh.status_code == 409
    assert publish(hub, token, name, "del-env", wheel("del-env", "2.0.0")).status_code == 201


def test_env_list_and_search_take_their_sort_page_and_output_flags(hub, tmp_path):
    name, token = user(hub)
    for env in ("zeta-env", "alpha-env"):
        assert publish(hub, token, name, env, wheel(env)).status_code == 201

    def listed(*args: str) -> list[str]:
        done = typed(*args, "--owner", name, "--output", "json", cwd=tmp_path, hub_url=hub["url"])
        assert done.returncode == 0, done.stderr
        return [item["name"] for item in json.loads(done.stdout)["items"]]

    assert listed("env", "list", "--sort", "name") == ["alpha-env", "zeta-env"]
    assert listed("env", "list", "--sort", "name", "--page", "2") == []
    assert listed("env", "search", "zeta") == ["zeta-env"]
    table = typed("env", "list", "--owner", name, cwd=tmp_path, hub_url=hub["url"])
    assert table.returncode == 0 and "2 environments (page 1)" in table.stdout


def test_env_uninstall_at_a_version_acts_only_on_that_installed_version(hub, tmp_path):
    name, token = user(hub)
    assert publish(hub, token, name, "un-env", wheel("un-env")).status_code == 201
    python = bare_venv(tmp_path / "venv")
    common = ["--lock-file", "e.lock", "--python", python]
    installed = typed(
        "env",
        "install",
        f"{name}/un-env@1.0.0",
        *common,
        cwd=tmp_path,
        hub_url=hub["url"],
        token=token,
    )
    assert installed.returncode == 0, installed.stderr
    wrong = typed("env", "uninstall", f"{name}/un-env@0.9.0", *common, cwd=tmp_path)
    assert wrong.returncode == 2 and "1.0.0 is installed, not 0.9.0" in wrong.stderr
    assert json.loads((tmp_path / "e.lock").read_text())["environments"], "nothing was removed"
    right = typed("env", "uninstall", f"{name}/un-env@1.0.0", *common, cwd=tmp_path)
    assert right.returncode == 0 and f"uninstalled {name}/un-env 1.0.0" in right.stdout, (
        right.stderr
    )
    assert json.loads((tmp_path / "e.lock").read_text())["environments"] == []


def test_install_locked_uses_the_hub_the_lock_names(hub, tmp_path):
    name, token = user(hub)
    assert publish(hub, token, name, "lock-env", wheel("lock-env")).status_code == 201
    python = bare_venv(tmp_path / "venv")
    first = typed(
        "env",
        "install",
        f"{name}/lock-env@1.0.0",
        "--python",
        python,
        cwd=tmp_path,
        hub_url=hub["url"],
        token=token,
    )
    assert first.returncode == 0, first.stderr
    assert json.loads((tmp_path / "environments.lock").read_text())["hub"] == hub["url"]
    other = tmp_path / "machine-b"  # another machine: no login, no PRIME_HUB_URL
    other.mkdir()
    (other / "environments.lock").write_text((tmp_path / "environments.lock").read_text())
    replay = typed("env", "install", "--locked", "--python", bare_venv(other / "venv"), cwd=other)
    assert replay.returncode == 0, replay.stderr
    assert f"installed {name}/lock-env 1.0.0" in replay.stdout


def test_push_without_a_login_says_to_log_in(tmp_path):
    from verifiers.cli.scaffold import scaffold

    root = scaffold("nologin-env", tmp_path / "envs")
    pushed = typed("env", "push", "--path", str(root), cwd=tmp_path)
    assert pushed.returncode == 2 and "prime login" in pushed.stderr
    assert "cannot reach" not in pushed.stderr


def test_install_of_something_that_is_not_a_spec_exits_2(tmp_path):
    result = typed("env", "install", "not-a-spec", cwd=tmp_path)
    assert result.returncode == 2 and "owner/name" in result.stderr


def test_a_hub_url_that_is_not_one_is_a_clear_error_and_reaches_nobody(tmp_path):
    """A lock file (or PRIME_HUB_URL) whose hub carries credentials, a query or a fragment could
    reach another server than the one it names; and a server that answers something other than
    the hub's API is said to be one, never a traceback."""
    import http.server
    import threading

    seen: list[str] = []

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>not a hub</html>")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    elsewhere = f"http://127.0.0.1:{server.server_port}"
    try:
        entry = {"owner": "a", "name": "e", "version": "1.0.0", "distribution": "e"}
        entry |= {"filename": "e-1.0.0-py3-none-any.whl", "sha256": "0" * 64}
        for hub in (f"http://127.0.0.1:9?x=@{elsewhere[7:]}", f"http://user:pw@{elsewhere[7:]}"):
            lock = {"lock_version": 1, "hub": hub, "environments": [entry]}
            (tmp_path / "environments.lock").write_text(json.dumps(lock))
            result = typed("env", "install", "--locked", cwd=tmp_path, hub_url="http://127.0.0.1:9")
            assert result.returncode != 0 and "[bad_hub_url]" in result.stderr, result.stderr
            assert "Traceback" not in result.stderr and not seen
        lock["hub"] = elsewhere
        (tmp_path / "environments.lock").write_text(json.dumps(lock))
        result = typed("env", "install", "--locked", cwd=tmp_path, hub_url="http://127.0.0.1:9")
        assert result.returncode != 0 and "[not_a_hub]" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr and seen
    finally:
        server.shutdown()


def test_create_user_refuses_a_name_that_reads_like_one_taken_in_a_line(tmp_path):
    data = str(tmp_path / "hub-data")
    first = typed("hub", "create-user", "alice", "--data-dir", data, cwd=tmp_path)
    assert first.returncode == 0 and first.stdout.strip().startswith("vfh_"), first.stderr
    again = typed("hub", "create-user", "al.ice_", "--data-dir", data, cwd=tmp_path)
    assert again.returncode == 2 and "[name_taken]" in again.stderr, again.stderr
    assert "Traceback" not in again.stderr


def test_hub_serve_finds_a_busy_port_before_doing_any_work(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        start = time.monotonic()
        result = typed(
            "hub",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(tmp_path / "d"),
            cwd=tmp_path,
            timeout=60,
        )
    assert result.returncode == 2 and "pick another --port" in result.stderr
    assert not (tmp_path / "d").exists() and time.monotonic() - start < 20


def test_the_web_sign_in_error_gives_web_advice(hub):
    form = httpx.get(f"{hub['url']}/login")
    (name, value), *_ = form.cookies.items()
    resp = httpx.post(
        f"{hub['url']}/login",
        data={"token": "vfh_wrong", "csrf": value},
        cookies={name: value},
        headers={"Origin": hub["url"]},
    )
    assert resp.status_code == 401 and "Paste a current API token" in resp.text
    assert "prime login" not in resp.text


def test_a_database_password_never_goes_on_the_command_line(tmp_path):
    """`prime hub serve --db postgresql://user:PASSWORD@...` showed it to every local user in
    /proc/PID/cmdline; the URL with its password comes from $PRIME_HUB_DB instead."""
    import subprocess
    import sys

    from hub_server.cli import database_url

    argv = [sys.executable, "-m", "hub_client.cli", "hub", "create-user", "x"]
    secret_url = "postgresql://hub:hunter2-secret@127.0.0.1:1/hub"
    for command in ("serve", "create-user"):
        args = [*argv[:4], command, *(["x"] if command == "create-user" else [])]
        done = subprocess.run(
            [*args, "--db", secret_url, "--data-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert "password on the command line" in done.stderr and "PRIME_HUB_DB" in done.stderr
    os.environ["PRIME_HUB_DB"] = secret_url
    try:
        assert database_url(None) == secret_url  # from the environment: fine
    finally:
        del os.environ["PRIME_HUB_DB"]
    assert database_url("postgresql://hub@127.0.0.1:1/hub") == "postgresql://hub@127.0.0.1:1/hub"
