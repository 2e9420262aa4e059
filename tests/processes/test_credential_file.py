"""Secrets come only from the user's own private files and are strong: every way a credential
file or variable was accepted that another local user could know or plant."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from verifiers.processes.credential_file import CredentialError, read_credential

STRONG = "k" * 8 + "-0123456789abcdef"


def secret_file(tmp_path: Path, text: str = STRONG, mode: int = 0o600) -> Path:
    path = tmp_path / "secret"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_the_users_own_private_file_is_read(tmp_path):
    assert read_credential(secret_file(tmp_path, STRONG + "\n")) == STRONG


@pytest.mark.parametrize(
    ("text", "mode", "says"),
    [
        (STRONG, 0o644, "open to others"),
        (STRONG, 0o640, "open to others"),
        (STRONG, 0o602, "open to others"),
        ("", 0o600, "holds no secret"),
        ("   \n", 0o600, "holds no secret"),
        ("short", 0o600, "5-character secret"),
    ],
    ids=["world-readable", "group-readable", "world-writable", "empty", "blank", "weak"],
)
def test_a_file_others_can_read_or_a_weak_secret_is_refused(tmp_path, text, mode, says):
    with pytest.raises(CredentialError, match=says):
        read_credential(secret_file(tmp_path, text, mode))


def test_a_fifo_is_refused_at_once_not_after_a_writer_comes(tmp_path):
    """Outside attack pass 4: ``--secret-file FIFO`` waited in open() until something wrote."""
    fifo = tmp_path / "secret"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(CredentialError, match="not a regular file"):
        read_credential(fifo)  # returns at once: a blocking open would hang the test here


def test_a_link_to_a_secret_is_refused(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(secret_file(tmp_path))
    with pytest.raises(CredentialError, match="without following a link"):
        read_credential(link)


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a file another user owns (uid 65534)")
def test_a_private_file_another_user_planted_is_refused(tmp_path):
    planted = secret_file(tmp_path)
    os.chown(planted, 65534, 65534)  # they made it 0600: they know what is in it
    with pytest.raises(CredentialError, match="belongs to uid 65534"):
        read_credential(planted)


def command(name: str) -> str:
    return str(Path(sys.executable).parent / name)


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("file-0644", "open to others"),
        ("blank-env", "holds no secret"),
        ("weak-env", "a secret needs at least 16 characters"),
    ],
)
def test_vf_env_server_refuses_a_secret_anyone_could_know(tmp_path, how, says):
    env = {k: v for k, v in os.environ.items() if k != "VF_ENV_SECRET"}
    args = [command("vf-env-server"), "reverse-text", "--port", "1"]
    if how == "file-0644":
        args += ["--secret-file", str(secret_file(tmp_path, mode=0o644))]
    else:
        env["VF_ENV_SECRET"] = "    " if how == "blank-env" else "abc"
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and says in done.stderr, done.stderr


def test_vf_eval_refuses_an_env_server_secret_file_others_can_read(tmp_path):
    done = subprocess.run(
        [
            *(command("vf-eval"), "reverse-text", "-b", "http://127.0.0.1:9/v1", "-m", "m"),
            *("--env-server", "127.0.0.1:1"),
            *("--env-secret-file", str(secret_file(tmp_path, mode=0o644))),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "open to others" in done.stderr, done.stderr


def test_vf_serve_refuses_a_weak_weights_secret(tmp_path):
    done = subprocess.run(
        [command("vf-serve"), "--port", "1"],
        capture_output=True,
        text=True,
        env={**os.environ, "VF_WEIGHTS_SECRET": "s"},
        timeout=120,
    )
    assert done.returncode == 2 and "a secret needs at least 16 characters" in done.stderr, (
        done.stdout + done.stderr
    )
