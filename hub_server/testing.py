"""Real backends for tests and benchmarks: a PostgreSQL server and an S3 server on loopback.

``postgres_server`` runs the distribution's PostgreSQL (``initdb`` + ``postgres``, Debian's
``postgresql`` package) on a free port with a temporary data directory, as the ``postgres`` user
when run as root (PostgreSQL refuses to run as root). ``moto_server`` runs moto's S3 server mode
(PyPI's ``moto[server]``), spoken to through the real S3 API by boto3.
"""

from __future__ import annotations

import glob
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
