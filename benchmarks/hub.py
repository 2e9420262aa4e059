"""Hub performance: push, install into a fresh virtualenv (cold and warm), simple-index throughput.

    python benchmarks/hub.py

Starts a hub on loopback with a temporary data dir. Targets on 2 cores: warm install under 3 s,
simple index at least 1,000 requests/s at concurrency 64.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from hub_client.client import HubClient
from hub_client.install import EnvSpec, install
from hub_server import Hub
from hub_server.process import start_hub
from verifiers.scaffold import scaffold

REPO = Path(__file__).resolve().parent.parent


def uv() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def fresh_venv(path: Path) -> str:
    subprocess.run(
        [uv(), "venv", "--python", sys.executable, str(path)], check=True, capture_output=True
    )
    subprocess.run(
        [uv(), "pip", "install", "--python", str(path / "bin" / "python"), "-e", str(REPO)],
        check=True,
        capture_output=True,
    )
    return str(path / "bin" / "python")


async def index_rate(url: str, concurrency: int, seconds: float) -> float:
    """Requests/s of the simple index (aiohttp client: httpx itself tops out near 200 req/s here)."""
    import aiohttp

    done = 0
    stop = time.perf_counter() + seconds
    headers = {"Accept": "application/vnd.pypi.simple.v1+json"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:

        async def worker() -> None:
            nonlocal done
            while time.perf_counter() < stop:
                async with session.get(url, headers=headers) as resp:
                    resp.raise_for_status()
                    await resp.read()
                done += 1

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return done / (time.perf_counter() - start)


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="vf-hub-bench-"))
    token = Hub(work / "data").create_user("bench")
    server = start_hub(work / "data")
    url = server.url
    try:
        root = scaffold("bench-env", work / "envs")
        env = {
            **os.environ,
            "PRIME_HUB_URL": url,
            "PRIME_API_KEY": token,
            "PRIME_CONFIG_DIR": str(work / "cfg"),
        }
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "hub_client.cli", "env", "push", "--path", str(root)],
            env=env,
            check=True,
            capture_output=True,
        )
        push = time.perf_counter() - start

        hub = HubClient(url, token)
        timings = {}
        for label in ("cold", "warm"):
            if label == "cold":
                subprocess.run([uv(), "cache", "clean", "bench-env"], capture_output=True)
            python = fresh_venv(work / f"venv-{label}")
            start = time.perf_counter()
            install(
                hub, [EnvSpec.parse("bench/bench-env@0.1.0")], work / f"{label}.lock", python=python
            )
            timings[label] = time.perf_counter() - start
        rate = asyncio.run(index_rate(f"{url}/simple/bench/bench-env/bench-env/", 64, 5))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    table = Table(title="Environments Hub on loopback")
    for col in ("measure", "value", "target"):
        table.add_column(col, justify="right")
    table.add_row("prime env push (uv build + upload)", f"{push:.2f} s", "")
    table.add_row(
        "prime env install, cold (fresh venv, env not cached)", f"{timings['cold']:.2f} s", ""
    )
    table.add_row("prime env install, warm (fresh venv)", f"{timings['warm']:.2f} s", "< 3 s")
    table.add_row("simple index requests/s, concurrency 64", f"{rate:,.0f}", ">= 1,000")
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
