"""Prime Intellect's official ``prime`` CLI (``prime==0.18.0`` from PyPI, unchanged, in a venv of
its own) against ``prime hub serve``, on both storage backends: each workflow step is run as a
user types it and judged by its effect (the hub's own API, files on disk, an import in a fresh
venv)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import httpx
import pytest
from support.hubs import new_user, serving

pytestmark = pytest.mark.slow
OFFICIAL = "prime==0.18.0"


@pytest.fixture(scope="module")
def official(tmp_path_factory) -> Path:
    """A venv holding the official CLI; the module is skipped where PyPI cannot be reached."""
    root = tmp_path_factory.mktemp("official-prime")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", OFFICIAL],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        pytest.skip(f"could not install {OFFICIAL} from the package index: {done.stderr[-500:]}")
    tools = root / "tools"  # uv alone on PATH: never this project's own `prime`
    tools.mkdir()
    from uv import find_uv_bin

    (tools / "uv").symlink_to(find_uv_bin())
    return root


URL_TTL = 20  # seconds an upload URL lives on this module's hubs (a staged push: twice that)


@pytest.fixture(scope="module")
def hub(tmp_path_factory, hub_backend):
    saved = os.environ.get("PRIME_HUB_UPLOAD_URL_TTL")
    os.environ["PRIME_HUB_UPLOAD_URL_TTL"] = str(URL_TTL)  # read by the hub process it starts
    try:
        with serving(tmp_path_factory, hub_backend) as running:
            yield running
    finally:
        if saved is None:
            os.environ.pop("PRIME_HUB_UPLOAD_URL_TTL", None)
        else:
            os.environ["PRIME_HUB_UPLOAD_URL_TTL"] = saved


class Official:
    """The official CLI with its own HOME (its config lives in ~/.prime), pointed at the hub."""

    def __init__(self, root: Path, home: Path, hub_url: str, token: str) -> None:
        self.root, self.home = root, home
        home.mkdir(parents=True, exist_ok=True)
        self("config", "set-base-url", hub_url)
        self("config", "set-frontend-url", hub_url)  # as docs/hub.md says: links land here
        self("config", "set-api-key", token)

    def __call__(self, *args: str, check: bool = True, venv: Path | None = None):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PRIME_", "VIRTUAL_ENV"))}
        env["HOME"] = str(self.home)
        env["PATH"] = f"{self.root / 'venv' / 'bin'}:{self.root / 'tools'}:/usr/bin:/bin"
        env["NO_COLOR"] = env["TERM"] = "dumb"
        env["COLUMNS"] = "200"
        if venv is not None:
            env["VIRTUAL_ENV"] = str(venv)
        done = subprocess.run(
            [str(self.root / "venv" / "bin" / "prime"), *args],
            cwd=self.home,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if check:
            assert done.returncode == 0, f"prime {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done


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


def staged_names(hub) -> list[str]:
    """What the hub holds staged now (the staging area beside its blob store)."""
    from hub_server.services.hub import Hub

    backend = hub["backend"]
    flags = backend.flags
    db = flags[flags.index("--db") + 1] if "--db" in flags else None
    blobs = flags[flags.index("--blobs") + 1] if "--blobs" in flags else None
    endpoint = flags[flags.index("--s3-endpoint") + 1] if "--s3-endpoint" in flags else None
    opened = Hub(hub["data"], db=db, blobs=blobs, s3_endpoint=endpoint, upload_workers=0)
    try:
        return opened.staging.names()
    finally:
        opened.close()


def test_official_push_is_judged_as_a_native_push(official, hub, tmp_path):
    carol = new_user(hub, "carol")
    auth = {"Authorization": f"Bearer {carol}"}
    api = f"{hub['url']}/api/v1/environmentshub"
    prime = Official(official, tmp_path / "home", hub["url"], carol)
    subprocess.run(
        [sys.executable, "-m", "verifiers.cli.init", "word-count"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    project = tmp_path / "environments" / "word_count"
    pyproject = project / "pyproject.toml"  # no dependencies: the install resolves nothing
    pyproject.write_text(
        pyproject.read_text().replace('dependencies = ["verifiers>=0.3.1"]', "dependencies = []")
    )

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

    # the same checks as a native push: the version's number is taken, and a package that is not
    # the environment's own is refused at the last finalize
    again = prime("env", "push", "--path", str(project), check=False)
    assert again.returncode != 0 and "already" in again.stdout.replace("\n", " ")

    # an upload URL is single-use, bound to its size and sha256, and only its own push's
    wheel = next((project / "dist").glob("*.whl")).read_bytes()
    import hashlib

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
    assert landed.status_code == 303
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
