"""The Environments Hub as its users meet it: a real server process, the real ``prime`` CLI, real
uv builds and installs; push, install, eval, upgrade, locked replay, this SDK on a second
machine, datasets attached to a version, tokens kept private, PEP 440 bumps."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support.eval_runs import add_with_the_tool
from support.hubs import (
    REPO,
    adder,
    built,
    fresh_venv,
    installed_version,
    new_user,
    prime,
    scaffold,
    scripted_eval,
)
from uv import find_uv_bin

from hub_client.client import HubClient
from hub_client.versions import bump, set_version
from verifiers.results import read_rows


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
    result = scripted_eval(python.parent / "vf-eval", "alice/hub-adder", server, tmp_path / "out")
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


@pytest.mark.slow
def test_a_v1_taskset_is_pushed_installed_and_evaluated_by_its_hub_id(hub, server, tmp_path):
    """``vf-init --v1``'s package goes through the hub as a classic one does: pushed, installed
    with ``prime env install`` into a fresh virtualenv, and run by ``OWNER/NAME@VERSION`` in env
    workers, its metadata naming what ran; a wrong owner or version is refused before any of
    the package's code runs."""
    token = new_user(hub, "vera")
    init = [sys.executable, "-m", "verifiers.cli.init", "hub-sums-v1", "--v1"]
    subprocess.run([*init, "-p", str(tmp_path / "envs")], check=True, capture_output=True)
    root = tmp_path / "envs" / "hub_sums_v1"
    module = root / "hub_sums_v1" / "__init__.py"
    marker = tmp_path / "imported.txt"  # a line each time a process runs the package's code
    module.write_text(
        module.read_text() + "\nimport os as _os\n\nif _os.environ.get('V1_MARKER'):\n"
        "    open(_os.environ['V1_MARKER'], 'a').write('imported\\n')\n"
    )
    prime(hub, token, "env", "push", "--path", str(root), cwd=tmp_path)
    python = fresh_venv(tmp_path / "venv")
    install = ["env", "install", "vera/hub-sums-v1@0.1.0", "--python", str(python)]
    prime(hub, token, *install, "--lock-file", "v.lock", cwd=tmp_path)
    assert installed_version(python, "hub-sums-v1") == "0.1.0"

    server.set_handler(add_with_the_tool)
    vf_eval, env = python.parent / "vf-eval", {**os.environ, "V1_MARKER": str(marker)}
    env.pop("PYTHONPATH", None)  # the fresh virtualenv's own install, nothing else
    for wrong, said in [
        ("mallory/hub-sums-v1", "the hub-sums-v1 installed here is vera/hub-sums-v1"),
        ("vera/hub-sums-v1@9.9.9", "hub-sums-v1 0.1.0 is installed but"),
        # the hint is a command prime takes: the owner recorded at install, not a bare name
        ("hub-sums-v1@9.9.9", "(`prime env install vera/hub-sums-v1@9.9.9`)"),
    ]:
        refused = scripted_eval(vf_eval, wrong, server, tmp_path / "refused", env=env)
        assert refused.returncode == 2 and said in refused.stderr, refused.stderr
    assert not marker.exists() and server.requests == []

    done = scripted_eval(vf_eval, "vera/hub-sums-v1@0.1.0", server, tmp_path / "out", env=env)
    assert done.returncode == 0, done.stderr
    [run] = (tmp_path / "out" / "evals").glob("vera--hub-sums-v1--scripted/*")
    rows = list(read_rows(run / "results.jsonl"))
    assert len(rows) == 2 and all(r["reward"] == 1.0 and r["error"] is None for r in rows)
    assert len((run / "traces.jsonl").read_text().splitlines()) == 2
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["env_id"] == "vera/hub-sums-v1" and meta["env_version"] == "0.1.0"
    version = HubClient(hub["url"]).version("vera", "hub-sums-v1", "0.1.0")
    assert meta["env_content_hash"] == version.content_hash
    assert meta["env_workers"]["kind"] == "processes"
    # imported once, by vf-eval (its workers are forked from it after the load, sharing that
    # import), and only for the run that passed its checks
    assert meta["env_workers"]["workers"] >= 1
    assert len(marker.read_text().splitlines()) == 1


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
    if hub["backend"].name != "embedded":
        pytest.skip(
            "one backend is enough: the SDK wheel is a file the hub builds, and push, install "
            "and eval on each backend run in test_push_install_eval_upgrade_and_locked_replay"
        )
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
    result = scripted_eval(
        venv / "bin" / "vf-eval", "remote/reverse-text", server, tmp_path / "out", env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "out" / "evals").glob("remote--reverse-text--scripted/*")
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["env_id"] == "remote/reverse-text" and meta["summary"]["num_rollouts"] == 2


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_local_install_and_a_hub_install_of_one_name_never_replace_each_other(hub, tmp_path):
    """`prime env install alice/x` silently replaced a local `vf-install x` (and `prime env
    uninstall` then left nothing); `vf-install x` over a hub install the same, the other way."""
    token = new_user(hub, "twosrc")
    subprocess.run(
        [sys.executable, "-m", "verifiers.cli.init", "two-src", "-p", str(tmp_path / "envs")],
        check=True,
    )
    root = tmp_path / "envs" / "two_src"
    prime(hub, token, "env", "push", "--path", str(root), cwd=tmp_path)
    python = fresh_venv(tmp_path / "venv")
    vf_install = [str(python.parent / "vf-install"), str(root)]
    assert subprocess.run(vf_install, capture_output=True, text=True).returncode == 0
    hub_install = ("env", "install", "twosrc/two-src@0.1.0", "--python", str(python))
    refused = prime(hub, token, *hub_install, "--lock-file", "t.lock", cwd=tmp_path, check=False)
    assert refused.returncode != 0
    assert "two-src is installed here locally" in refused.stderr and "editable from" in refused.stderr
    assert "uv pip uninstall" in refused.stderr
    assert not (tmp_path / "t.lock").exists()  # nothing was pinned either
    subprocess.run(
        [find_uv_bin(), "pip", "uninstall", "--python", str(python), "two-src"], check=True
    )
    prime(hub, token, *hub_install, "--lock-file", "t.lock", cwd=tmp_path)
    again = subprocess.run(vf_install, capture_output=True, text=True)
    assert again.returncode == 2 and "installed here from the hub as twosrc/two-src" in again.stderr
    assert "prime env uninstall twosrc/two-src" in again.stderr
    assert installed_version(python, "two-src") == "0.1.0"
