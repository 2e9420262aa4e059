"""The hub's simple index and a warm ``prime env install`` beside pypiserver's (issue 44's anchor).

    python benchmarks/hub_vs_pypiserver.py                       # 300 environments x 3 versions
    python benchmarks/hub_vs_pypiserver.py --pypiserver-venv DIR # reuse (or make) its venv there

Starts a hub on loopback (the embedded backend), seeded by its bulk load (``hub.seed``: rows, no
file bytes; env-0, whose wheels are downloaded and installed, pushed through its API), and
pypiserver 2.x from the package index, in a venv of its own, over the same wheels in its
fastest documented setup: ``pypiserver[cache]`` (the watchdog-backed ``cached-dir`` backend its
README recommends), one project's wheels in its directory (its cost grows with the files it
holds), under each server it documents that is installed here (bottle's ``auto``, and
``gunicorn``); the cheaper of the two is the anchor. Then, in alternating rounds, each server is
started afresh and measured:

- the index: the project's page (the PEP 691 JSON an installer asks for) from 32 clients for
  ``--seconds``, and the server's CPU per request (user + system of its process tree, psutil):
  CPU, not wall time, is what compares on a shared machine (at a high load p99 is the
  scheduler's);
- a warm install of the same wheel into a fresh venv (uv's cache warm: each is run once first):
  ``prime env install OWNER/NAME@VERSION`` (hash-pinned and confined) against the hub, and
  ``uv pip install NAME==VERSION --index-url`` pypiserver's; the median wall time of each.

Targets (issue 44): the index's CPU per request at most a fifth of pypiserver's; the install no
slower than uv against pypiserver.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import httpx
import stop_cleanly  # beside this script
from hub import Hub, cpu_seconds, free_port, jobs_for, load, make_wheel, push_all, seed
from rich.console import Console
from rich.table import Table

PEP691 = "application/vnd.pypi.simple.v1+json"
PACKAGES = ("pypiserver[cache]==2.4.2", "gunicorn")  # its cached-dir backend, and a server
SERVERS = ("auto", "gunicorn")  # pypiserver's --server values with nothing more to install


def pypiserver_venv(root: Path) -> Path | None:
    """``root/bin/pypi-server``, installed from the package index unless there already; None
    where the index cannot be reached."""
    from uv import find_uv_bin

    if not (root / "bin" / "pypi-server").exists():
        uv = find_uv_bin()
        made = subprocess.run([uv, "venv", "-q", str(root)], capture_output=True, text=True)
        done = made.returncode == 0 and subprocess.run(
            [uv, "pip", "install", "-q", "--python", str(root / "bin" / "python"), *PACKAGES],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if not done or done.returncode != 0:
            return None
    return root


class Served:
    """A server process on loopback and the URL of the one project's page it is asked for."""

    def __init__(self, command: list[str], page: str, env: dict[str, str] | None = None) -> None:
        self.page = page
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(page, headers={"Accept": PEP691}, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"{command[0]} did not serve {page}")
            time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(20)


def start_pypiserver(venv: Path, packages: Path, server: str) -> Served:
    port = free_port()
    command = [str(venv / "bin" / "pypi-server"), "run", "-i", "127.0.0.1", "-p", str(port)]
    command += ["--server", server, "--backend", "cached-dir", str(packages)]
    return Served(command, f"http://127.0.0.1:{port}/simple/env-0/")


def start_hub(hub: Hub) -> Served:
    """The seeded hub's store, served by a hub process of its own (so each round starts fresh)."""
    port = free_port()
    command = [sys.executable, "-m", "hub_client.cli", "hub", "serve", "--port", str(port)]
    command += ["--data-dir", str(hub.data)]
    return Served(command, f"http://127.0.0.1:{port}/simple/owner0/env-0/env-0/")


def index_cpu_us(served: Served, seconds: float) -> float:
    """The server's CPU per request, in microseconds, over ``seconds`` of 32 clients."""
    asyncio.run(load([served.page], 32, 1.0, PEP691))  # warm: its page rendered, its imports
    before = cpu_seconds(served.process.pid)
    latencies = asyncio.run(load([served.page], 32, seconds, PEP691))
    return 1e6 * (cpu_seconds(served.process.pid) - before) / len(latencies)


def install_seconds(
    work: Path, install: Callable[[Path], list[str]], repeats: int, env: dict[str, str]
) -> float:
    """The median wall time of ``install(python)`` into a fresh venv, after one run that warms
    uv's cache."""
    from uv import find_uv_bin

    times = []
    for k in range(repeats + 1):
        target = work / f"target-{time.monotonic_ns()}"
        subprocess.run([find_uv_bin(), "venv", "-q", str(target)], check=True)
        start = time.perf_counter()
        command = install(target / "bin" / "python")
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=target)
        if done.returncode != 0:
            raise RuntimeError(f"{done.args}: {done.stdout[-1000:]}{done.stderr[-1000:]}")
        if k:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    stop_cleanly.install()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=300, help="seeded, 3 versions each")
    parser.add_argument("--seconds", type=float, default=5.0, help="of each index measure")
    parser.add_argument("--rounds", type=int, default=3, help="alternating, of each server")
    parser.add_argument("--installs", type=int, default=5, help="warm ones, of each client")
    parser.add_argument(
        "--pypiserver-venv", type=Path, help="reuse (or make) pypiserver's venv here"
    )
    args = parser.parse_args()
    work = stop_cleanly.scratch_dir("vf-hub-pypiserver-")
    with ExitStack() as stack:
        rows = measures(args, work, stack)
    table = Table(title=f"Hub vs pypiserver, {args.envs:,} environments (CPU: its process tree)")
    for column in ("measure", "value", "target"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*row)
    Console(width=120).print(table)


def measures(args: argparse.Namespace, work: Path, stack: ExitStack) -> list[tuple[str, str, str]]:
    hub = Hub(work / "hub", [])
    stack.callback(hub.stop)
    owners = hub.owners(10)
    jobs = jobs_for(owners, range(args.envs), ["1.0.0", "1.1.0", "2.0.0"])
    installed = [job for job in jobs if job[2] == "env-0"]  # downloaded: pushed for real
    seed(hub, [job for job in jobs if job[2] != "env-0"])  # rows only, no file bytes
    asyncio.run(push_all(hub.url, installed, 1))
    token = hub.user("installer")
    packages = work / "packages"  # env-0's wheels, byte for byte the hub's
    packages.mkdir()
    for version in ("1.0.0", "1.1.0", "2.0.0"):
        filename = make_wheel("env-0", version)[0]
        resp = httpx.get(f"{hub.url}/files/owner0/env-0/{filename}")
        resp.raise_for_status()
        (packages / filename).write_bytes(resp.content)
    hub.stop()  # each round serves its store afresh
    venv = pypiserver_venv(args.pypiserver_venv or work / "pypiserver")
    if venv is None:
        return [("pypiserver", "not measured", "the package index cannot be reached")]
    cpu: dict[str, list[float]] = {"hub": [], **{server: [] for server in SERVERS}}
    for _ in range(args.rounds):
        for who, values in cpu.items():
            served = start_hub(hub) if who == "hub" else start_pypiserver(venv, packages, who)
            try:
                values.append(index_cpu_us(served, args.seconds))
            finally:
                served.stop()
    med = {who: statistics.median(values) for who, values in cpu.items()}
    fastest = min(SERVERS, key=med.__getitem__)
    rows = [
        (
            "simple index CPU/request: " + ("hub" if who == "hub" else f"pypiserver ({who})"),
            f"{med[who]:.0f} us (" + ", ".join(f"{x:.0f}" for x in values) + ")",
            "",
        )
        for who, values in cpu.items()
    ]
    rows.append(
        ("simple index: pypiserver / hub CPU", f"{med[fastest] / med['hub']:.2f}x", ">= 5x")
    )
    return rows + install_rows(args, work, hub, token, start_pypiserver(venv, packages, fastest))


def install_rows(
    args: argparse.Namespace, work: Path, hub: Hub, token: str, pypiserver: Served
) -> list[tuple[str, str, str]]:
    """The warm install of env-0 2.0.0 by each client, each against its own server."""
    from uv import find_uv_bin

    served = start_hub(hub)
    try:
        url = served.page.split("/simple/")[0]
        env = {**os.environ, "PRIME_HUB_URL": url, "PRIME_API_KEY": token}
        env["PRIME_CONFIG_DIR"] = str(work / "config")
        # each target venv sees this checkout's SDK, as an environment's venv has it installed
        # (prime refuses a target without it); uv's install does not look
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH")) if p
        )

        lock = "environments.lock"  # in the target venv (the cwd of each run)
        index = pypiserver.page.split("/simple/")[0] + "/simple/"

        def prime(python: Path) -> list[str]:
            command = [sys.executable, "-m", "hub_client.cli", "env", "install"]
            return [*command, "owner0/env-0@2.0.0", "--python", str(python), "--lock-file", lock]

        def uv(python: Path) -> list[str]:
            command = [find_uv_bin(), "pip", "install", "-q", "--python", str(python)]
            return [*command, "env-0==2.0.0", "--index-url", index]

        native = install_seconds(work, prime, args.installs, env)
        anchor = install_seconds(work, uv, args.installs, env)
    finally:
        served.stop()
        pypiserver.stop()
    return [
        ("warm `prime env install`, against the hub", f"{1000 * native:.0f} ms", ""),
        ("warm `uv pip install`, against pypiserver", f"{1000 * anchor:.0f} ms", ""),
        ("install: prime / uv", f"{native / anchor:.2f}x", "<= 1x"),
    ]


if __name__ == "__main__":
    main()
