"""Servers that listen on Unix sockets start under a deep ``TMPDIR`` (a CI runner's, a test's
own): each failed to bind (a socket's path is at most 107 bytes) and the command died at start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from support.hubs import user, wheel

from hub_server import Hub
from hub_server.process import start_hub
from verifiers.processes.server import free_port
from verifiers.processes.socket_dirs import SUN_PATH_MAX, socket_dir

BIN = Path(sys.executable).parent


def vf_eval(base_url: str, out: Path, *flags: str) -> list:
    """vf-eval's argv: 2 examples of reverse-text, one rollout each."""
    return [
        BIN / "vf-eval",
        "reverse-text",
        "-b",
        base_url,
        "-n",
        "2",
        "-r",
        "1",
        *flags,
        "--output-dir",
        str(out),
    ]


@pytest.fixture
def deep_tmpdir(tmp_path, monkeypatch) -> Path:
    """A ``TMPDIR`` too deep for a socket in any directory made under it."""
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    assert len(str(deep)) > SUN_PATH_MAX - 40
    monkeypatch.setenv("TMPDIR", str(deep))
    return deep


def test_a_socket_dir_under_a_deep_tmpdir_goes_where_its_socket_fits(deep_tmpdir, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(deep_tmpdir))
    made = socket_dir("vf-test-", "pool.sock")
    try:
        assert made.parent == Path("/tmp")
        assert len(str(made / "pool.sock").encode()) <= SUN_PATH_MAX
        assert made.stat().st_mode & 0o777 == 0o700
    finally:
        made.rmdir()
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")  # a shallow one is used as it is
    shallow = socket_dir("vf-test-", "pool.sock")
    shallow.rmdir()
    assert shallow.parent == Path("/tmp")


def test_vf_eval_with_env_workers_runs_under_a_deep_tmpdir(server, deep_tmpdir, tmp_path):
    done = subprocess.run(
        vf_eval(server.base_url, tmp_path / "out"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = list((tmp_path / "out").rglob("results.jsonl"))
    assert len(rows) == 1 and len(rows[0].read_text().splitlines()) == 2
    assert not list(deep_tmpdir.iterdir())  # nothing left in the deep dir either


def test_vf_env_server_serves_under_a_deep_tmpdir(server, deep_tmpdir, tmp_path):
    port = free_port()
    env_server = subprocess.Popen(
        [BIN / "vf-env-server", "reverse-text", "--port", str(port), "--workers", "1", "--no-auth"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert "vf-env-server:" in env_server.stdout.readline()  # listening
        done = subprocess.run(
            vf_eval(server.base_url, tmp_path / "out", "--env-server", f"127.0.0.1:{port}"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        rows = next((tmp_path / "out").rglob("results.jsonl")).read_text().splitlines()
        assert [json.loads(row)["example_id"] for row in rows] == [0, 1]
    finally:
        env_server.terminate()
        env_server.communicate(timeout=60)


def test_the_hub_starts_and_takes_a_push_under_a_deep_tmpdir(deep_tmpdir, tmp_path):
    data = tmp_path / "hub"
    data.mkdir()
    made = Hub(data)
    try:
        admin = made.create_user("root", True)
    finally:
        made.close()
    with start_hub(data) as hub_process:
        hub = {"url": hub_process.url, "admin": admin}
        name, token = user(hub)
        filename, body = wheel("deep-tmp")
        pushed = httpx.post(
            f"{hub['url']}/api/v1/environments/{name}/deep-tmp/versions",
            files={"wheel": (filename, body)},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert pushed.status_code in (200, 201), pushed.text
        listed = httpx.get(f"{hub['url']}/api/v1/environments/{name}/deep-tmp", timeout=30)
        assert listed.status_code == 200 and "1.0.0" in listed.text
    assert os.path.isdir(deep_tmpdir)
