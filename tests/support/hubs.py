"""What the hub tests share: users and their tokens, the real ``prime`` CLI against a hub,
scaffolded and built environments, hand-made wheels and eval files and their raw uploads, raw
HTTP requests, fresh virtualenvs. (The hubs themselves are fixtures: tests/support/hub_fixtures.py.)"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from hub_client.client import HubClient
from hub_server.db.blobs import S3BlobStore, open_blob_store
from hub_server.process import start_hub
from hub_server.services.hub import Hub

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def serving(tmp_path_factory, backend) -> Iterator[dict]:
    """A hub process (no SDK wheel) on ``backend`` with an admin ``root``: a test module's
    ``hub`` fixture yields from it."""
    data = tmp_path_factory.mktemp("hub")
    admin = backend.create_user(data, "root", is_admin=True)
    with start_hub(data, backend=backend.flags) as server:
        yield {"url": server.url, "admin": admin, "data": data, "backend": backend}


def open_hub(backend, data: Path) -> Hub:
    """The store of ``backend`` in ``data``, opened here (no upload workers)."""
    return Hub(
        data, db=backend.db, blobs=backend.blobs, s3_endpoint=backend.s3_endpoint, upload_workers=0
    )


def hub_settings(hub: dict[str, Any], **extra: Any) -> Any:
    """Settings for an app of this process over the store the ``hub`` fixture's server runs on
    (same data dir, database and blobs), with ``extra`` on top."""
    from hub_server.settings import HubSettings

    backend = hub["backend"]
    return HubSettings(
        data_dir=hub["data"],
        db=backend.db,
        blobs=backend.blobs,
        s3_endpoint=backend.s3_endpoint,
        **extra,
    )


def stored(backend, data: Path) -> set[str]:
    """Every blob in the store, listed directly: the files directory, or the S3 bucket."""
    store = open_blob_store(backend.blobs, data, backend.s3_endpoint)
    if isinstance(store, S3BlobStore):
        prefix = f"{store.prefix}/" if store.prefix else ""
        listed = store.client.list_objects_v2(Bucket=store.bucket, Prefix=prefix)
        names = [item["Key"].rpartition("/")[2] for item in listed.get("Contents", [])]
    else:
        names = [path.name for path in (data / "files").glob("??/*")]
    return {name for name in names if re.fullmatch(r"[0-9a-f]{64}", name)}


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
    from hub_client.commands.env import build

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


def scripted_eval(vf_eval: Path, env_id: str, server, out: Path, env=None):
    """``vf-eval ENV_ID`` from a given install, 2 examples x 1 rollout, against a scripted server."""
    command = [str(vf_eval), env_id, "-b", server.base_url, "-m", "scripted", "-n", "2", "-r", "1"]
    return subprocess.run(
        [*command, "--output-dir", str(out)], capture_output=True, text=True, timeout=300, env=env
    )


# --- hand-made uploads, raw requests, prime as a user types it ----------------------------------------


def user(hub, prefix="u") -> tuple[str, str]:
    name = f"{prefix}{uuid.uuid4().hex[:10]}"
    return name, HubClient(hub["url"], hub["admin"]).create_user(name).token


def wheel(name, version="1.0.0", extra=(), top=None, filename=None) -> tuple[str, bytes]:
    dist = name.replace("-", "_").replace(".", "_")  # as uv build names it
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(f"{top or dist}/__init__.py", "def load_environment(): pass\n")
        z.writestr(
            f"{dist}-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: s\n",
        )
        z.writestr(
            f"{dist}-{version}.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        for member, data in extra:
            z.writestr(member, data)
        z.writestr(f"{dist}-{version}.dist-info/RECORD", "")
    return filename or f"{dist}-{version}-py3-none-any.whl", buf.getvalue()


def publish(hub, token, owner, name, whl, sd=None, **form) -> httpx.Response:
    files = {"wheel": whl, **({"sdist": sd} if sd else {})}
    return httpx.post(
        f"{hub['url']}/api/v1/environments/{owner}/{name}/versions",
        files=files,
        data=form,
        headers={"Authorization": f"Bearer {token}"} if token else {},
        timeout=60,
    )


def raw_request(url: str, head: str, body: bytes = b"", wait: float = 10.0) -> bytes:
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=wait) as sock:
        sock.sendall(head.encode() + body)
        chunks = b""
        while b"\r\n\r\n" not in chunks:
            data = sock.recv(65536)
            if not data:
                break
            chunks += data
        return chunks


def run_prime(hub, token, *args, cwd):
    """``prime ARGS`` as ``token``'s user against ``hub``, its config in ``cwd``; unchecked."""
    env = {
        **os.environ,
        "PRIME_HUB_URL": hub["url"],
        "PRIME_API_KEY": token,
        "PRIME_CONFIG_DIR": str(cwd / ".prime"),
    }
    return subprocess.run(
        [sys.executable, "-m", "hub_client.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def zipped(members: list[tuple[str, bytes]], compression=zipfile.ZIP_STORED, **kw) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as archive:
        for name, data in members:
            archive.writestr(name, data)
        archive.comment = kw.get("comment", b"")
    return buf.getvalue()


def package(
    name: str = "arc-env",
    version: str = "1.0.0",
    metadata: str = "",
    members: tuple[tuple[str, bytes], ...] = (),
    compression=zipfile.ZIP_STORED,
) -> tuple[str, bytes]:
    """An environment's wheel: its package, METADATA (plus ``metadata`` lines), WHEEL and
    ``members``."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    data = zipped(
        [
            (f"{dist}/__init__.py", b"def load_environment(): pass\n" + b"# padding\n" * 50),
            *members,
            (
                f"{info}/METADATA",
                f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{metadata}".encode(),
            ),
            (f"{info}/WHEEL", b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"),
            (f"{info}/RECORD", b""),
        ],
        compression,
    )
    return f"{dist}-{version}-py3-none-any.whl", data


def eval_files(version: dict, run_id: str, rewards, summary=None, model="m") -> dict:
    meta = {
        "summary": summary if summary is not None else {"avg_reward": 0.5},
        "model": model,
        "env_id": version["name"],
        "env_version": version["version"],
        "env_content_hash": version["content_hash"],
        "run_id": run_id,
    }
    rows = "\n".join(
        json.dumps({"example_id": i, "reward": r}) if not isinstance(r, str) else r
        for i, r in enumerate(rewards)
    )
    return {
        "metadata": ("metadata.json", json.dumps(meta).encode()),
        "results": ("results.jsonl", rows.encode()),
    }


class ReadCounter:
    """Counts the database reads a hub's state opens from the moment it is installed
    (``count``, which a test may reset): a page's reads are one connection, not several."""

    def __init__(self, state: Any) -> None:
        self.count = 0
        read = state.database.read

        def counted() -> Any:
            self.count += 1
            return read()

        state.database.read = counted
