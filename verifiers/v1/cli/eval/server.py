"""A ``vf-env-server`` of a v1 taskset for one eval run (``run_eval_server``): the command
started as this process's child on a free loopback port, locked with a secret made for the run
(so no other local process can connect and have its workers send the run's key), its
workers loading the taskset by id with the run's ``[env]`` block as the classic env-server path
does (``verifiers.v1.kind``), stopped when the run ends and killed if this process dies."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from verifiers.errors import EnvWorkerError
from verifiers.processes.die_with_parent import guarded
from verifiers.processes.server import free_port
from verifiers.v1.configs.serve import ServeConfig

START_TIMEOUT_S = 600.0
"""How long the server's workers may take to load the taskset (upstream waits as long)."""
READY = "vf-env-server:"
"""How the command's stdout starts the line it prints once its workers are up."""


def worker_count(serve: ServeConfig) -> str:
    """``--workers`` for the ``[serve]`` pool: a static pool's ``num_workers``; an elastic
    pool's ``max_workers``, or one per core (``auto``) when it sets none."""
    pool = serve.pool
    if pool.type == "static":
        return str(pool.num_workers)
    return str(pool.max_workers) if pool.max_workers else "auto"


@asynccontextmanager
async def env_server(
    env_id: str, env_args: dict[str, Any], workers: str, key_var: str
) -> AsyncIterator[tuple[str, str]]:
    """``vf-env-server ENV_ID`` serving ``env_args`` for the context; its ``tcp://`` address and
    secret once its workers are up. Requests may read their key from ``key_var`` alone."""
    port = free_port()
    secret = secrets.token_urlsafe(32)
    with tempfile.TemporaryDirectory(prefix="vf-env-server-") as tmp:  # 0700
        secret_file = Path(tmp) / "secret"
        secret_file.touch(0o600)
        secret_file.write_text(secret)
        command = [sys.executable, "-m", "verifiers.cli.env_server", env_id]
        command += ["-a", json.dumps(env_args), "--host", "127.0.0.1", "--port", str(port)]
        command += ["--workers", workers, "--secret-file", str(secret_file), "--key-var", key_var]
        argv, extra = guarded(command)
        log = Path(tmp) / "server.log"
        with log.open("wb") as err:
            process = await asyncio.create_subprocess_exec(
                *argv,
                env={**os.environ, **extra},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
            )
        try:
            await _ready(process, log, env_id)
            yield f"tcp://127.0.0.1:{port}", secret
        finally:
            if process.returncode is None:
                process.terminate()  # the server stops its workers, and they their tool servers
                try:
                    await asyncio.wait_for(process.wait(), 30)
                except TimeoutError:
                    process.kill()
                    await process.wait()


async def _ready(process: Any, log: Path, env_id: str) -> None:
    """Return once the server printed its ready line; its log's tail if it exits first."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = await asyncio.wait_for(process.stdout.readline(), left)
        except TimeoutError:
            break
        if line.decode(errors="replace").startswith(READY):
            return
        if not line:  # stdout closed: the server exited
            await process.wait()
            tail = (await asyncio.to_thread(log.read_text, errors="replace"))[-2000:]
            raise EnvWorkerError(
                f"vf-env-server for {env_id} exited ({process.returncode}) before serving: {tail}"
            )
    raise EnvWorkerError(f"vf-env-server for {env_id} did not start within {START_TIMEOUT_S:g}s")
