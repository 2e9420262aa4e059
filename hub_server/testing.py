"""Real backends for tests and benchmarks: a PostgreSQL server and an S3 server on loopback,
and Prime's official ``prime`` CLI (the other client of the hub's API) in a venv of its own.

``postgres_server`` runs the distribution's PostgreSQL (``initdb`` + ``postgres``, Debian's
``postgresql`` package) on a free port with a temporary data directory, as the ``postgres`` user
when run as root (PostgreSQL refuses to run as root). ``moto_server`` runs moto's S3 server mode
(PyPI's ``moto[server]``), spoken to through the real S3 API by boto3. ``official_prime_venv``
installs ``OFFICIAL_PRIME`` from the package index; ``OfficialPrime`` runs it with a HOME of its
own, pointed at a hub.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from verifiers.processes.server import free_port, stop_process

S3_TEST_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


class BackendUnavailable(RuntimeError):
    """PostgreSQL or moto is not installed here (scripts/setup.sh installs both)."""


@dataclass
class Postgres:
    url: str
    port: int
    command: list[str] | None = None
    stop_command: list[str] | None = None
    process: subprocess.Popen | None = None
    log: Any = None

    def restart(self, down_s: float = 0.0) -> None:
        """Stop the server with ``pg_ctl stop -m fast`` (every connection is cut, open
        transactions roll back), stay down ``down_s`` seconds, start it again on the same
        port and data directory, and wait until it answers."""
        assert self.process is not None and self.command and self.stop_command
        subprocess.run(self.stop_command, check=True, capture_output=True, timeout=60)
        self.process.wait(30)
        time.sleep(down_s)
        self.process = subprocess.Popen(self.command, stdout=self.log, stderr=subprocess.STDOUT)
        _wait_until_up(self.url, self.process, "")

    def database(self, name: str | None = None) -> str:
        """A fresh, empty database on this server; its URL."""
        name = name or f"hub_{uuid.uuid4().hex[:12]}"
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url.rsplit("/", 1)[0] + f"/{name}"


def pg_bin(tool: str) -> str:
    found = shutil.which(tool) or next(
        iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{tool}"), reverse=True)), None
    )
    if found is None:
        raise BackendUnavailable(
            f"PostgreSQL's {tool} is not installed: apt-get install postgresql (scripts/setup.sh does)"
        )
    return found


@contextmanager
def postgres_server() -> Iterator[Postgres]:
    """A throwaway server; its directory is made here (under the system temp dir, which the
    ``postgres`` user can reach) and removed afterwards."""
    root = os.geteuid() == 0
    work = Path(tempfile.mkdtemp(prefix="hub-postgres-"))
    data, sockets = work / "pgdata", work / "pgsock"
    sockets.mkdir(exist_ok=True)
    as_user = ["runuser", "-u", "postgres", "--"] if root else []
    if root:
        shutil.chown(work, "postgres")
        shutil.chown(sockets, "postgres")
    subprocess.run(
        [*as_user, pg_bin("initdb"), "-D", str(data), "-U", "hub", "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    log = (work / "postgres.log").open("w")
    command = [
        *as_user,
        pg_bin("postgres"),
        "-D",
        str(data),
        "-p",
        str(port),
        "-k",
        str(sockets),
        "-c",
        "listen_addresses=127.0.0.1",
        "-c",
        "fsync=off",  # a test server: durability is not what is tested
        "-c",
        "max_connections=200",
    ]
    stop = [*as_user, pg_bin("pg_ctl"), "stop", "-D", str(data), "-m", "fast", "-w"]
    server = Postgres(f"postgresql://hub@127.0.0.1:{port}/postgres", port, command, stop, None, log)
    server.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_until_up(server.url, server.process, work / "postgres.log")
        yield server
    finally:
        stop_process(server.process, 20)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def _wait_until_up(url: str, process: subprocess.Popen, log: Path | str) -> None:
    import psycopg

    deadline = time.monotonic() + 30
    while True:
        try:
            psycopg.connect(url, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if process.poll() is not None or time.monotonic() > deadline:
                told = Path(log).read_text()[-1000:] if log else ""
                raise BackendUnavailable(f"PostgreSQL did not start: {told}") from None
            time.sleep(0.1)


@dataclass
class MotoS3:
    url: str

    def bucket_url(self, prefix: str = "hub") -> str:
        """A fresh bucket on this server, as ``s3://bucket/prefix``."""
        import boto3

        bucket = f"hub-{uuid.uuid4().hex[:12]}"
        boto3.client("s3", endpoint_url=self.url).create_bucket(Bucket=bucket)
        return f"s3://{bucket}/{prefix}"


@contextmanager
def moto_server() -> Iterator[MotoS3]:
    try:
        import moto.server  # noqa: F401
    except ImportError:
        raise BackendUnavailable(
            "moto[server] is not installed (scripts/setup.sh installs it)"
        ) from None
    for key, value in S3_TEST_CREDENTIALS.items():
        os.environ.setdefault(key, value)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url, timeout=2)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise BackendUnavailable("moto's S3 server did not start") from None
                time.sleep(0.1)
        yield MotoS3(url)
    finally:
        process.terminate()
        process.wait(20)


# --- Prime's official CLI -------------------------------------------------------------------------------
OFFICIAL_PRIME = "prime==0.18.0"


def official_prime_venv(root: Path) -> Path:
    """``root``, holding a venv (``root/venv``) with ``OFFICIAL_PRIME`` installed from the package
    index, and ``root/tools`` with ``uv`` alone (the PATH its commands get: never this project's
    own ``prime``). BackendUnavailable where the index cannot be reached."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    done = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", OFFICIAL_PRIME],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise BackendUnavailable(
            f"could not install {OFFICIAL_PRIME} from the package index: {done.stderr[-500:]}"
        )
    tools = root / "tools"
    tools.mkdir(exist_ok=True)
    from uv import find_uv_bin

    if not (tools / "uv").exists():
        (tools / "uv").symlink_to(find_uv_bin())
    return root


class OfficialCommandFailed(AssertionError):
    """An official ``prime`` command that was to succeed did not (its output in the message)."""


class OfficialPrime:
    """The official CLI of ``official_prime_venv(root)`` with its own HOME (its config lives in
    ~/.prime), pointed at the hub (its API and, for the links it prints, its web pages); logged
    in with ``token`` if given."""

    def __init__(self, root: Path, home: Path, hub_url: str, token: str | None) -> None:
        self.root, self.home = root, home
        home.mkdir(parents=True, exist_ok=True)
        self("config", "set-base-url", hub_url)
        self("config", "set-frontend-url", hub_url)
        if token is not None:
            self("config", "set-api-key", token)

    def env(self, venv: Path | None = None) -> dict[str, str]:
        """Its environment: none of this project's settings, and ``venv`` (where ``env
        install`` installs) as the active venv."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PRIME_", "VIRTUAL_ENV"))}
        env["HOME"] = str(self.home)
        env["PATH"] = f"{self.root / 'venv' / 'bin'}:{self.root / 'tools'}:/usr/bin:/bin"
        env["NO_COLOR"] = env["TERM"] = "dumb"
        env["COLUMNS"] = "200"
        if venv is not None:
            env["VIRTUAL_ENV"] = str(venv)
        return env

    def __call__(
        self, *args: str, check: bool = True, venv: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.root / "venv" / "bin" / "prime"), *args],
            cwd=self.home,
            env=self.env(venv),
            capture_output=True,
            text=True,
            timeout=180,
        )
        if check and done.returncode != 0:
            raise OfficialCommandFailed(f"prime {' '.join(args)}:\n{done.stdout}\n{done.stderr}")
        return done

    def start(self, *args: str) -> subprocess.Popen[str]:
        """``prime ARGS`` running (an interactive command), its output merged into a pipe."""
        return subprocess.Popen(
            [str(self.root / "venv" / "bin" / "prime"), *args],
            cwd=self.home,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def api_key(self) -> str:
        """The key the official CLI saved in its config (``""`` for none)."""
        config = self.home / ".prime" / "config.json"
        return json.loads(config.read_text()).get("api_key", "") if config.exists() else ""
