"""Hub costs at size: 10,000 environments x 3 versions pushed through the real publish route.

    python benchmarks/hub.py                          # the embedded backend (SQLite + files)
    python benchmarks/hub.py --backend postgresql     # PostgreSQL + S3 (moto), started here
    python benchmarks/hub.py --envs 2000              # a smaller hub

Starts a hub process on loopback, creates owners, pushes every version over HTTP (multipart, as
``prime env push`` uploads), then measures at concurrency 32 (the index also at 64): simple-index
requests/s and p99, search p99, environment-page p99, push rate at the start and at the end, the
hub process's CPU per request (from /proc, so the load generator's own CPU is not counted), its
RSS, and the index rate while 4 pushes run. Search CPU is compared with a 20-environment hub.
On the full hub, a push and an install by each client as a user runs them, this project's
``prime`` and Prime's official ``prime==0.18.0`` (in a venv of its own, from the package index;
its staged push declares, PUTs and finalizes the wheel and the source archive): each command's
wall time and the hub's CPU while it runs, median of 3, and the ratio official/native.
The hub caches searches under its catalog's generation (any change starts afresh), so repeated
searches are cheap; "every query new" measures searches none of which was made before.

Targets on 2 cores (issue 44): search p99 <= 20 ms, environment page p99 <= 50 ms, and search
CPU within 2x of the 20-environment figure;
push CPU at the end within 1.5x of an empty hub's; index under 4 pushes >= 0.7x its idle rate;
index >= 2,000 req/s at concurrency 64 (embedded), >= 1,000 (PostgreSQL); issue 40: the
official client's push costs at most 1.5x the native push.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import stop_cleanly  # beside this script
from rich.console import Console
from rich.table import Table

from hub_server.testing import BackendUnavailable

WORDS = ["maze", "math", "chess", "poem", "code", "sort", "graph", "word", "logic", "trivia"]
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """CPU of a process and its live descendants (the hub's upload workers), from /proc."""
    total = 0.0
    for proc in [pid, *children(pid)]:
        try:
            fields = Path(f"/proc/{proc}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


def cpu_seconds_fine(pid: int) -> float:
    """CPU of a process's live threads and its live descendants', from each task's schedstat (in
    ns: ``cpu_seconds`` counts 10 ms ticks, too coarse for one command's few tens of ms)."""
    total = 0
    for proc in [pid, *children(pid)]:
        with contextlib.suppress(FileNotFoundError):
            for task in Path(f"/proc/{proc}/task").iterdir():
                with contextlib.suppress(FileNotFoundError):
                    total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def children(pid: int) -> list[int]:
    """A process's live descendants, at any depth: the upload workers are the children of the
    hub's fork server, itself the hub's child, and a push's work runs in them."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(FileNotFoundError):
                for child in (task / "children").read_text().split():
                    found += [int(child), *children(int(child))]
    return found


def rss_mib(pid: int) -> float:
    """Resident memory of a process and its live descendants (the upload workers)."""
    total = 0.0
    for proc in [pid, *children(pid)]:
        with contextlib.suppress(FileNotFoundError):
            for line in Path(f"/proc/{proc}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
    return total


def make_wheel(name: str, version: str) -> tuple[str, bytes]:
    dist = name.replace("-", "_")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{dist}/__init__.py", "def load_environment(**kw):\n    return None\n")
        z.writestr(
            f"{dist}-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            f"Summary: a {random.choice(WORDS)} environment about {random.choice(WORDS)}\n",
        )
        z.writestr(
            f"{dist}-{version}.dist-info/WHEEL",
            "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        z.writestr(f"{dist}-{version}.dist-info/RECORD", "")
    return f"{dist}-{version}-py3-none-any.whl", buf.getvalue()


class Hub:
    """A hub process with its backend; ``extra`` are the serve flags selecting that backend."""

    def __init__(self, work: Path, extra: list[str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data = work / "data"
        self.extra = extra
        base = [sys.executable, "-m", "hub_client.cli", "hub"]
        admin = subprocess.run(
            [*base, "create-user", "bench", "--admin", "--data-dir", str(self.data), *extra],
            capture_output=True,
            text=True,
            check=True,
        )
        self.admin = admin.stdout.strip().splitlines()[-1]
        self.process = subprocess.Popen(
            [*base, "serve", "--port", str(self.port), "--data-dir", str(self.data), *extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("the hub did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(20)

    def user(self, name: str) -> str:
        """A new user's token."""
        resp = httpx.post(
            f"{self.url}/api/v1/users",
            json={"name": name},
            headers={"Authorization": f"Bearer {self.admin}"},
        )
        resp.raise_for_status()
        return resp.json()["token"]

    def owners(self, count: int) -> list[tuple[str, str]]:
        client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.admin}"})
        made = []
        for i in range(count):
            resp = client.post("/api/v1/users", json={"name": f"owner{i}"})
            resp.raise_for_status()
            made.append((f"owner{i}", resp.json()["token"]))
        return made


async def push_all(
    url: str, jobs: list[tuple[str, str, str, str]], concurrency: int
) -> list[float]:
    """Publish (owner, token, name, version) jobs; returns each push's latency."""
    latencies: list[float] = []
    queue = list(reversed(jobs))
    async with aiohttp.ClientSession() as session:

        async def worker() -> None:
            while queue:
                owner, token, name, version = queue.pop()
                filename, data = make_wheel(name, version)
                form = aiohttp.FormData()
                form.add_field("wheel", data, filename=filename)
                form.add_field("tags", f'["{random.choice(WORDS)}"]')
                start = time.perf_counter()
                async with session.post(
                    f"{url}/api/v1/environments/{owner}/{name}/versions",
                    data=form,
                    headers={"Authorization": f"Bearer {token}"},
                ) as resp:
                    if resp.status != 201:
                        raise RuntimeError(f"push {owner}/{name} {version}: {await resp.text()}")
                latencies.append(time.perf_counter() - start)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


async def load(urls: list[str], concurrency: int, seconds: float, accept: str = "") -> list[float]:
    """GET the urls round-robin from ``concurrency`` workers; returns each request's latency."""
    latencies: list[float] = []
    stop = time.perf_counter() + seconds
    headers = {"Accept": accept} if accept else {}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker(offset: int) -> None:
            i = offset
            while time.perf_counter() < stop:
                start = time.perf_counter()
                async with session.get(urls[i % len(urls)], headers=headers) as resp:
                    await resp.read()
                    if resp.status != 200:
                        raise RuntimeError(f"GET {urls[i % len(urls)]}: HTTP {resp.status}")
                latencies.append(time.perf_counter() - start)
                i += concurrency

        await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return latencies


def fresh_search_urls(hub: Hub) -> list[str]:
    """Searches never made before (pairs of words, each sort, three pages): the uncached path."""
    pairs = [f"{a}+{b}" for i, a in enumerate(WORDS) for b in WORDS[i + 1 :]]
    return [
        f"{hub.url}/api/v1/environments?q={q}&sort={sort}&page={page}"
        for q in [*WORDS, *pairs]
        for sort in ("updated", "created", "name", "downloads")
        for page in (1, 2, 3)
    ]


def measure_each_once(hub: Hub, urls: list[str], concurrency: int) -> dict:
    """Every url requested exactly once, ``concurrency`` at a time."""
    before = cpu_seconds(hub.process.pid)

    async def run() -> list[float]:
        queue = list(urls)
        latencies: list[float] = []
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as s:

            async def worker() -> None:
                while queue:
                    url, start = queue.pop(), time.perf_counter()
                    async with s.get(url) as resp:
                        await resp.read()
                        if resp.status != 200:
                            raise RuntimeError(f"GET {url}: HTTP {resp.status}")
                    latencies.append(time.perf_counter() - start)

            await asyncio.gather(*(worker() for _ in range(concurrency)))
        return latencies

    latencies = asyncio.run(run())
    return {
        "p99": p99(latencies),
        "cpu_ms": 1000 * (cpu_seconds(hub.process.pid) - before) / len(latencies),
    }


def p99(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(0.99 * len(values)))] * 1000


def measure(hub: Hub, urls: list[str], concurrency: int, seconds: float, accept: str = "") -> dict:
    before = cpu_seconds(hub.process.pid)
    start = time.perf_counter()
    latencies = asyncio.run(load(urls, concurrency, seconds, accept))
    wall = time.perf_counter() - start
    cpu = cpu_seconds(hub.process.pid) - before
    return {
        "rate": len(latencies) / wall,
        "p99": p99(latencies),
        "cpu_ms": 1000 * cpu / len(latencies),
    }


def timed_pushes(hub: Hub, jobs: list, concurrency: int = 4) -> dict:
    before = cpu_seconds(hub.process.pid)
    start = time.perf_counter()
    asyncio.run(push_all(hub.url, jobs, concurrency))
    wall = time.perf_counter() - start
    cpu = cpu_seconds(hub.process.pid) - before
    return {"rate": len(jobs) / wall, "cpu_ms": 1000 * cpu / len(jobs)}


def index_while_pushing(hub: Hub, urls: list[str], pushes: list, seconds: float) -> float:
    """The index rate while 4 pushes run. The pushes come from a process of their own, as
    they would from other machines: in the load generator's event loop, building and
    sending wheels would slow the generator itself, and the measure would blame the hub."""
    pusher = multiprocessing.get_context("spawn").Process(
        target=push_in_process, args=(hub.url, pushes), daemon=True
    )
    pusher.start()
    time.sleep(1.0)  # the pushes under way before the reads start
    try:
        start = time.perf_counter()
        latencies = asyncio.run(load(urls, 32, seconds, "application/vnd.pypi.simple.v1+json"))
        wall = time.perf_counter() - start
        if not pusher.is_alive():
            raise RuntimeError("the pushes ended before the measure did: give it more versions")
        return len(latencies) / wall
    finally:
        pusher.terminate()
        pusher.join(10)


def push_in_process(url: str, pushes: list) -> None:
    asyncio.run(push_all(url, pushes, 4))


def jobs_for(owners: list[tuple[str, str]], envs: range, versions: list[str]) -> list[tuple]:
    return [
        (owners[i % len(owners)][0], owners[i % len(owners)][1], f"env-{i}", v)
        for v in versions
        for i in envs
    ]


def search_urls(hub: Hub) -> list[str]:
    return [f"{hub.url}/api/v1/environments?q={w}" for w in WORDS] + [
        f"{hub.url}/api/v1/environments?q={w}&sort=downloads&page=2" for w in WORDS
    ]


def small_hub_search_cpu(work: Path, extra: list[str], seconds: float) -> float:
    hub = Hub(work / "small", extra)
    try:
        owners = hub.owners(2)
        asyncio.run(push_all(hub.url, jobs_for(owners, range(20), ["1.0.0"]), 4))
        return measure(hub, search_urls(hub), 32, seconds)["cpu_ms"]
    finally:
        hub.stop()


# --- the two clients, as users run them -------------------------------------------------------------
REPEATS = 3


def project(root: Path, name: str) -> Path:
    """``vf-init NAME`` under ``root``, with no dependencies (an install resolves nothing)."""
    subprocess.run(
        [sys.executable, "-m", "verifiers.cli.init", name],
        cwd=root,
        check=True,
        capture_output=True,
    )
    path = root / "environments" / name.replace("-", "_")
    pyproject = path / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('dependencies = ["verifiers>=0.3.1"]', "dependencies = []")
    )
    return path


def timed_command(
    hub: Hub, run: Callable[..., subprocess.CompletedProcess], *args: str, **kwargs: Any
) -> tuple[float, float]:
    """(wall s, hub CPU ms) of one client command, ``run(*args, **kwargs)`` (the hub idle
    otherwise)."""
    before, start = cpu_seconds_fine(hub.process.pid), time.perf_counter()
    done = run(*args, **kwargs)
    wall, cpu = time.perf_counter() - start, cpu_seconds_fine(hub.process.pid) - before
    if done.returncode != 0:
        raise RuntimeError(f"{done.args}: {done.stdout[-1000:]}{done.stderr[-1000:]}")
    return wall, 1000 * cpu


def client_costs(hub: Hub, work: Path) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Each client's push and install, ``REPEATS`` times, interleaved (a new environment each
    time); raises BackendUnavailable where the official client cannot be installed."""
    from uv import find_uv_bin

    from hub_server.testing import OfficialPrime, official_prime_venv

    root = work / "clients"
    root.mkdir()
    official_root = official_prime_venv(root / "official")
    token = hub.user("pusher")
    official = OfficialPrime(official_root, root / "home", hub.url, token)
    native_env = {
        **os.environ,
        "PRIME_HUB_URL": hub.url,
        "PRIME_API_KEY": token,
        "PRIME_CONFIG_DIR": str(root / "native-config"),
    }

    def native(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "hub_client.cli", *args]
        return subprocess.run(command, env=native_env, cwd=root, capture_output=True, text=True)

    def venv(name: str) -> Path:
        path = root / name
        subprocess.run(
            [find_uv_bin(), "venv", "--python", sys.executable, str(path)],
            check=True,
            capture_output=True,
        )
        return path

    costs: dict[str, dict[str, list[tuple[float, float]]]] = {
        "native": {"push": [], "install": []},
        "official": {"push": [], "install": []},
    }
    for k in range(REPEATS):
        mine, theirs = project(root, f"bench-native-{k}"), project(root, f"bench-official-{k}")
        costs["native"]["push"].append(
            timed_command(hub, native, "env", "push", "--path", str(mine))
        )
        costs["official"]["push"].append(
            timed_command(
                hub, official, "env", "push", "--path", str(theirs), "--visibility", "PUBLIC"
            )
        )
        target = venv(f"native-target-{k}")
        costs["native"]["install"].append(
            timed_command(
                hub,
                native,
                *("env", "install", f"pusher/bench-native-{k}@0.1.0"),
                *("--python", str(target / "bin" / "python")),
                *("--lock-file", str(target / "environments.lock")),
            )
        )
        target = venv(f"official-target-{k}")
        costs["official"]["install"].append(
            timed_command(
                hub, official, "env", "install", f"pusher/bench-official-{k}@0.1.0", venv=target
            )
        )
    return costs


def client_rows(costs: dict[str, dict[str, list[tuple[float, float]]]]) -> list[tuple[str, ...]]:
    """The table's rows: each client's median wall and hub CPU per push and install, and the
    official/native ratios (the push's against issue 40's 1.5x)."""
    rows = []
    for step in ("push", "install"):
        medians = {
            client: (
                statistics.median(w for w, _ in costs[client][step]),
                statistics.median(c for _, c in costs[client][step]),
            )
            for client in costs
        }
        for client, (wall, cpu) in medians.items():
            rows.append(
                (f"{client} `prime env {step}`: wall / hub CPU", f"{wall:.2f} s / {cpu:.1f} ms", "")
            )
        wall_ratio = medians["official"][0] / medians["native"][0]
        cpu_ratio = medians["official"][1] / medians["native"][1]
        target = "<= 1.5x" if step == "push" else ""
        rows.append(
            (
                f"{step}, official / native: wall, hub CPU",
                f"{wall_ratio:.2f}x, {cpu_ratio:.2f}x",
                target,
            )
        )
    return rows


def backend_flags(backend: str, work: Path, stack: ExitStack) -> list[str]:
    if backend == "embedded":
        return []
    from hub_server.testing import moto_server, postgres_server

    database = stack.enter_context(postgres_server())
    s3 = stack.enter_context(moto_server())
    return ["--db", database.url, "--blobs", s3.bucket_url("bench"), "--s3-endpoint", s3.url]


def main() -> None:
    stop_cleanly.install()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["embedded", "postgresql"], default="embedded")
    parser.add_argument("--envs", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    random.seed(0)
    work = stop_cleanly.scratch_dir("vf-hub-bench-")
    rows: list[tuple[str, str, str]] = []
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        extra = backend_flags(args.backend, work, stack)
        small_search_cpu = small_hub_search_cpu(work, extra, args.seconds / 2)
        if args.backend != "embedded":  # a fresh database for the big hub
            stack.close()
            work.mkdir(parents=True, exist_ok=True)
            extra = backend_flags(args.backend, work, stack)
        hub = Hub(work / "big", extra)
        stack.callback(hub.stop)
        owners = hub.owners(100)
        first = jobs_for(owners, range(200), ["1.0.0"])
        start_push = timed_pushes(hub, first)
        t0 = time.perf_counter()
        fill = [j for j in jobs_for(owners, range(args.envs), ["1.0.0", "1.1.0", "2.0.0"])]
        fill = [j for j in fill if not (j[3] == "1.0.0" and int(j[2][4:]) < 200)]
        tail, fill = fill[-200:], fill[:-200]
        asyncio.run(push_all(hub.url, fill, 8))
        populate_s = time.perf_counter() - t0
        end_push = timed_pushes(hub, tail)
        env_urls = [
            f"{hub.url}/simple/{o}/env-{i}/env-{i}/"
            for i in random.sample(range(args.envs), min(500, args.envs))
            for o in [owners[i % len(owners)][0]]
        ]
        json_index = "application/vnd.pypi.simple.v1+json"
        index32 = measure(hub, env_urls, 32, args.seconds, json_index)
        index64 = measure(hub, env_urls, 64, args.seconds, json_index)
        fresh = measure_each_once(hub, fresh_search_urls(hub), 32)
        search = measure(hub, search_urls(hub), 32, args.seconds)
        pages = [u.replace("/simple/", "/e/").rsplit("/", 2)[0] for u in env_urls]
        page = measure(hub, pages, 32, args.seconds)
        rss = rss_mib(hub.process.pid)
        extra_jobs = jobs_for(
            owners, range(args.envs), [f"3.0.{k}" for k in range(1 + 4000 // args.envs)]
        )
        busy = index_while_pushing(hub, env_urls, extra_jobs, args.seconds)
        try:
            clients = client_rows(client_costs(hub, work))
        except BackendUnavailable as exc:
            clients = [("official client push and install", "not measured", str(exc)[:60])]

    index_target = 2000 if args.backend == "embedded" else 1000
    rows = [
        ("versions pushed", f"{3 * args.envs:,} in {populate_s:.0f} s", ""),
        ("simple index req/s, c=32", f"{index32['rate']:,.0f}", ""),
        ("simple index p99, c=32", f"{index32['p99']:.1f} ms", ""),
        ("simple index req/s, c=64", f"{index64['rate']:,.0f}", f">= {index_target:,}"),
        ("simple index server CPU/request", f"{index32['cpu_ms']:.2f} ms", ""),
        ("search p99, c=32", f"{search['p99']:.1f} ms", "<= 20 ms"),
        ("search req/s, c=32", f"{search['rate']:,.0f}", ""),
        (
            "search server CPU/request (20 envs)",
            f"{search['cpu_ms']:.2f} ms ({small_search_cpu:.2f} ms)",
            f"<= 2x ({search['cpu_ms'] / small_search_cpu:.2f}x)",
        ),
        (
            "search, every query new: p99 / CPU",
            f"{fresh['p99']:.1f} ms / {fresh['cpu_ms']:.2f} ms",
            "",
        ),
        ("environment page p99, c=32", f"{page['p99']:.1f} ms", "<= 50 ms"),
        ("environment page server CPU/request", f"{page['cpu_ms']:.2f} ms", ""),
        ("push rate, empty hub (c=4)", f"{start_push['rate']:.0f}/s", ""),
        (
            f"push rate at {3 * args.envs:,} versions (c=4)",
            f"{end_push['rate']:.0f}/s",
            "",
        ),
        (
            "push server CPU, empty -> full",
            f"{start_push['cpu_ms']:.1f} -> {end_push['cpu_ms']:.1f} ms",
            f"<= 1.5x ({end_push['cpu_ms'] / start_push['cpu_ms']:.2f}x)",
        ),
        ("hub RSS after the load", f"{rss:.0f} MiB", ""),
        *clients,
        (
            "index req/s while 4 pushes run, c=32",
            f"{busy:,.0f} ({busy / index32['rate']:.2f}x idle)",
            ">= 0.7x",
        ),
    ]
    table = Table(title=f"Environments Hub, {args.backend} backend, {args.envs:,} environments")
    for column in ("measure", "value", "target"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*row)
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
