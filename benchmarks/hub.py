"""Hub costs at size: 10,000 environments x 3 versions, and a push by each client on that hub.

    python benchmarks/hub.py                          # the embedded backend (SQLite + files)
    python benchmarks/hub.py --backend postgresql     # PostgreSQL + S3 (moto), started here
    python benchmarks/hub.py --envs 2000              # a smaller hub
    python benchmarks/hub.py --clients-only --versions 1   # only the two clients' push and install

Starts a hub process on loopback, creates owners, and fills it: the first and the last 200
versions are pushed over HTTP (multipart, as ``prime env push`` uploads) and measured; the
versions between are a setup step, seeded in this process by the hub's bulk load (``seed``: the
rows a push of each leaves, a few statements over thousands of versions, where publishing each
took half an hour for 30,000 on PostgreSQL). Then it measures at concurrency 32 (the index also
at 64): simple-index requests/s and p99, search p99, environment-page p99, push rate at the start
and at the end, the hub's CPU per request, its RSS, and the index rate while 4 pushes run.
Search CPU is compared with a 20-environment hub. The hub caches searches under its catalog's
generation (any change starts afresh), so repeated searches are cheap; "every query new"
measures searches none of which was made before; "every page new" likewise asks for 500
environment pages none asked for before (each rendered by the request that asks). The title
gives the machine's load average: on a shared machine a p99 is mostly the run queue's wait.

On the full hub, each client's push (issue 40), two ways:
- the protocols, replayed from here (``--pushes`` of each, interleaved): this project's push
  (who am I, is the version free, one multipart POST) and Prime's official client's staged push
  (resolve, declare, PUT with no token on a new connection, finalize, for the wheel and for the
  source archive). No client process starts, so the hub's CPU per push is measured over many;
- the commands as a user runs them (``--repeats`` of each, interleaved): this project's
  ``prime env push`` / ``env install`` and Prime's official ``prime==0.18.0`` (in a venv of its
  own, from the package index): each command's wall time and the hub's CPU while it ran.
The hub's CPU is its process's and its descendants' (the fork server, the upload workers), user
and system, from psutil, less the hub's idle rate (measured after it settles) over the same
wall time, so a client that runs longer is not charged the hub's idling; the table shows the
CPU as measured in brackets. CPU, not wall time, is what compares on a shared machine.

Targets on 2 cores (issue 44): search p99 <= 20 ms, environment page p99 <= 50 ms, and search
CPU within 2x of the 20-environment figure; push CPU at the end within 1.5x of an empty hub's;
index under 4 pushes >= 0.7x its idle rate; index >= 2,000 req/s at concurrency 64 (embedded),
>= 1,000 (PostgreSQL); issue 40: the official client's push costs the hub at most 1.5x the CPU
of the native push.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import io
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import psutil
import stop_cleanly  # beside this script
from rich.console import Console
from rich.table import Table

from hub_server.testing import BackendUnavailable

WORDS = ["maze", "math", "chess", "poem", "code", "sort", "graph", "word", "logic", "trivia"]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes(pid: int) -> list[psutil.Process]:
    """A process and its live descendants, at any depth: the upload workers are the children of
    the hub's fork server, itself the hub's child, and a push's work runs in them."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def cpu_seconds(pid: int) -> float:
    """CPU (user + system) of a process and its live descendants, threads that have ended
    included (psutil: 10 ms ticks per process)."""
    total = 0.0
    for proc in processes(pid):
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            total += times.user + times.system
    return total


def idle_cpu_rate(pid: int, settle: float = 2.0, window: float = 4.0) -> float:
    """The hub's CPU seconds per second while nothing is asked of it (its loop, its workers'
    watchers), measured over ``window`` after ``settle`` seconds of quiet: what a command's
    measure subtracts for its wall time, so a slower client is not charged the hub's idling."""
    time.sleep(settle)
    before, start = cpu_seconds(pid), time.perf_counter()
    time.sleep(window)
    return (cpu_seconds(pid) - before) / (time.perf_counter() - start)


def rss_mib(pid: int) -> float:
    """Resident memory of a process and its live descendants (the upload workers)."""
    total = 0.0
    for proc in processes(pid):
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss / 2**20
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
        flags = dict(zip(extra[::2], extra[1::2], strict=True))
        self.store = {"db": flags.get("--db"), "blobs": flags.get("--blobs")}
        self.store["s3_endpoint"] = flags.get("--s3-endpoint")
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


SEED_BATCH = 5000  # versions per transaction


def seeded_version(owner: str, name: str, version: str) -> tuple[Any, list[Any]]:
    """What ``publishing.publish_version`` hands the catalog for a push of this job's wheel
    (with no sdist): the wheel's metadata as the hub reads it (``inspect_wheel``), its files'
    hashes and sizes, the blob keys it would store them under."""
    from hub_protocol.archives import inspect_wheel
    from hub_server.db.catalog import NewVersion, StoredFile
    from hub_server.services.names import normalize_version

    filename, data = make_wheel(name, version)
    meta, content_hash = inspect_wheel(data)
    sha, metadata_sha = hashlib.sha256(data).hexdigest(), hashlib.sha256(meta.raw).hexdigest()
    wheel = StoredFile("wheel", filename, sha, len(data), sha, metadata_sha, metadata_sha)
    new = NewVersion(
        owner=owner,
        name=name,
        distribution=meta.name,
        version=normalize_version(meta.version),
        content_hash=content_hash,
        requires_python=meta.requires_python,
        dependencies=meta.requires_dist,
        summary=meta.summary,
        top_level=meta.top_level,
        visibility=None,
        readme=None,
        description=None,
        tags=[random.choice(WORDS)],
    )
    return new, [wheel]


def seed(hub: Hub, jobs: list[tuple[str, str, str, str]]) -> None:
    """Setup, not a measure: the rows a push of each (owner, token, name, version) job would
    leave (environments, versions, files, tags, the search index), written by the hub's bulk
    load (``hub_server.db.bulk_load``: the catalog's rows for commits one by one, a transaction
    per ``SEED_BATCH`` versions) into the store the running hub serves (it caches nothing another
    process changes). The wheels are made and read as a push's are (``seeded_version``), but
    their bytes are not stored: nothing measured downloads a seeded version's files (the index,
    pages and search read rows), and storing 60,000 blobs in moto's S3 alone took longer than
    the rest of a run. What is measured after it are real HTTP pushes. Publishing each version
    through the publish service took 31 minutes for 30,000 versions on PostgreSQL."""
    from hub_server.db.bulk_load import commit_versions
    from hub_server.services.hub import Hub as Service

    service = Service(hub.data, upload_workers=0, **hub.store)
    try:
        for start in range(0, len(jobs), SEED_BATCH):
            batch = jobs[start : start + SEED_BATCH]
            commit_versions(service.database, [seeded_version(o, n, v) for o, _, n, v in batch])
    finally:
        service.close()
    for owner, token, name, version in jobs[-1:]:  # the running hub serves what was seeded
        auth = {"Authorization": f"Bearer {token}"}
        api = httpx.get(f"{hub.url}/api/v1/environments/{owner}/{name}/versions/{version}")
        page = httpx.get(f"{hub.url}/e/{owner}/{name}", headers=auth)
        found = [  # by a word (PostgreSQL's parser reads "env-99" as "env" and "-99")
            item["name"]
            for page in range(1, 11)
            for item in httpx.get(
                f"{hub.url}/api/v1/environments",
                params={"q": "env", "owner": owner, "sort": "name", "per_page": 100, "page": page},
            ).json()["items"]
        ]
        for what, ok in (
            ("its version", api.status_code == 200),
            ("its page", page.status_code == 200 and version in page.text),
            ("a search", name in found),
        ):
            if not ok:
                raise RuntimeError(
                    f"the hub does not serve the seeded {owner}/{name} {version}: {what}"
                )


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
        "p50": 1000 * statistics.median(latencies),
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


def new_page_urls(
    hub: Hub, owners: list[tuple[str, str]], envs: int, measured: list[str]
) -> list[str]:
    """Up to 500 environment pages none of which was asked for before, nor is among the
    ``measured`` ones (whose measure asks for each for the first time too, then again): none
    on a hub of at most 500 environments."""
    asked = set(measured)
    urls = (f"{hub.url}/e/{owners[i % len(owners)][0]}/env-{i}" for i in range(envs))
    return [u for u in urls if u not in asked][:500]


def small_hub_search_cpu(work: Path, extra: list[str], seconds: float) -> float:
    hub = Hub(work / "small", extra)
    try:
        owners = hub.owners(2)
        asyncio.run(push_all(hub.url, jobs_for(owners, range(20), ["1.0.0"]), 4))
        return measure(hub, search_urls(hub), 32, seconds)["cpu_ms"]
    finally:
        hub.stop()


# --- the two clients, as users run them -------------------------------------------------------------


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


@dataclass(frozen=True)
class Sample:
    """One client command: its wall time, the hub's CPU while it ran, and that CPU less the
    hub's idle rate over the same wall time (what the command itself cost the hub)."""

    wall_s: float
    cpu_ms: float
    net_cpu_ms: float


def timed_command(
    hub: Hub, idle: float, run: Callable[..., subprocess.CompletedProcess], *args: str, **kw: Any
) -> Sample:
    """One client command, ``run(*args, **kw)``, with nothing else asking the hub anything;
    ``idle``: the hub's idle CPU rate (``idle_cpu_rate``)."""
    before, start = cpu_seconds(hub.process.pid), time.perf_counter()
    done = run(*args, **kw)
    wall, cpu = time.perf_counter() - start, cpu_seconds(hub.process.pid) - before
    if done.returncode != 0:
        raise RuntimeError(f"{done.args}: {done.stdout[-1000:]}{done.stderr[-1000:]}")
    return Sample(wall, 1000 * cpu, 1000 * (cpu - idle * wall))


Costs = dict[str, dict[str, list[Sample]]]


def client_costs(hub: Hub, work: Path, repeats: int, official_venv: Path | None) -> Costs:
    """Each client's push and install, ``repeats`` times, interleaved (a new environment each
    time), after the hub has settled; raises BackendUnavailable where the official client cannot
    be installed. ``official_venv``: an ``official_prime_venv`` root to reuse (made if absent)."""
    from uv import find_uv_bin

    from hub_server.testing import OfficialPrime, official_prime_venv

    root = work / "clients"
    root.mkdir()
    official_root = official_prime_venv(official_venv or root / "official")
    token = hub.user("pusher")
    official = OfficialPrime(official_root, root / "home", hub.url, token)
    native_env = {
        **os.environ,
        "PRIME_HUB_URL": hub.url,
        "PRIME_API_KEY": token,
        "PRIME_CONFIG_DIR": str(root / "native-config"),
        # each target venv sees this checkout's SDK, as an environment's venv has it installed
        # (prime refuses a target without it)
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")) if p
        ),
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

    costs: Costs = {
        "native": {"push": [], "install": []},
        "official": {"push": [], "install": []},
    }
    idle = idle_cpu_rate(hub.process.pid)
    for k in range(repeats):
        mine, theirs = project(root, f"bench-native-{k}"), project(root, f"bench-official-{k}")
        targets = venv(f"native-target-{k}"), venv(f"official-target-{k}")
        costs["native"]["push"].append(
            timed_command(hub, idle, native, "env", "push", "--path", str(mine))
        )
        costs["official"]["push"].append(
            timed_command(
                hub, idle, official, "env", "push", "--path", str(theirs), "--visibility", "PUBLIC"
            )
        )
        costs["native"]["install"].append(
            timed_command(
                hub,
                idle,
                native,
                *("env", "install", f"pusher/bench-native-{k}@0.1.0"),
                *("--python", str(targets[0] / "bin" / "python")),
                *("--lock-file", str(targets[0] / "environments.lock")),
            )
        )
        costs["official"]["install"].append(
            timed_command(
                hub,
                idle,
                official,
                *("env", "install", f"pusher/bench-official-{k}@0.1.0"),
                venv=targets[1],
            )
        )
    return costs


def archives(name: str, version: str) -> tuple[tuple[str, bytes], tuple[str, bytes], bytes]:
    """What each client uploads for NAME VERSION: the wheel, the sdist ``prime env push``
    sends beside it, and the official client's flat source archive (README, pyproject, module)."""
    wheel = make_wheel(name, version)
    dist = name.replace("-", "_")
    members = {
        "README.md": f"# {name}\n\na {random.choice(WORDS)} environment\n".encode(),
        "pyproject.toml": f'[project]\nname = "{name}"\nversion = "{version}"\n'.encode(),
        f"{dist}.py": b"def load_environment(**kw):\n    return None\n",
    }
    sdist_members = {**members, "PKG-INFO": f"Name: {name}\nVersion: {version}\n".encode()}
    sdist = tar_gz({f"{dist}-{version}/{path}": data for path, data in sdist_members.items()})
    return wheel, (f"{dist}-{version}.tar.gz", sdist), tar_gz(members)


def tar_gz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, data in members.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def native_push(http: httpx.Client, owner: str, name: str, version: str) -> None:
    """The requests of ``prime env push``: who am I, is the version free, the multipart POST."""
    (wheel, sdist, _) = archives(name, version)
    http.get("/api/v1/me").raise_for_status()
    if http.get(f"/api/v1/environments/{owner}/{name}/versions/{version}").status_code != 404:
        raise RuntimeError(f"{owner}/{name} {version} exists already")
    resp = http.post(
        f"/api/v1/environments/{owner}/{name}/versions",
        files={"wheel": wheel, "sdist": sdist},
        data={"tags": "[]"},
    )
    if resp.status_code != 201:
        raise RuntimeError(f"native push of {name}: {resp.text[:300]}")


def staged_push(http: httpx.Client, owner: str, name: str, version: str) -> None:
    """The requests of the official client's ``prime env push`` (prime_cli/commands/env.py):
    resolve, declare the wheel, PUT it with no token, finalize it, the same for the source
    archive, whose finalize publishes."""
    (filename, wheel), _, source = archives(name, version)

    def ok(resp: httpx.Response) -> Any:
        if resp.status_code != 200:
            raise RuntimeError(f"staged push of {name}: {resp.request.url}: {resp.text[:300]}")
        return resp.json()["data"]

    push = ok(http.post("/api/v1/environmentshub/resolve", json={"name": name}))["id"]
    declared = {"sha256": hashlib.sha256(wheel).hexdigest(), "semantic_version": version}
    at = ok(
        http.post(
            f"/api/v1/environmentshub/{push}/wheels",
            json={**declared, "filename": filename, "size": len(wheel), "metadata": {}},
        )
    )
    ok(httpx.put(at["upload_url"], content=wheel))
    ok(http.post(f"/api/v1/environmentshub/{push}/wheels/{at['wheel_id']}/finalize"))
    at = ok(
        http.post(
            f"/api/v1/environmentshub/{push}/versions",
            json={
                "filename": f"{name}-{version}.tar.gz",
                "sha256": hashlib.sha256(source).hexdigest(),
                "size": len(source),
                "semantic_version": version,
            },
        )
    )
    ok(httpx.put(at["upload_url"], content=source))
    ok(http.post(f"/api/v1/environmentshub/{push}/versions/{at['version_id']}/finalize"))


def protocol_rows(hub: Hub, pushes: int) -> list[tuple[str, str, str]]:
    """The hub's CPU per push of each protocol, the requests each client makes replayed from
    here ``pushes`` times each, interleaved, a new environment each time: no client process
    starts, so the measure holds many pushes and the hub's idle share is small. Each push opens
    a connection of its own for its API calls, as each command does."""
    token = hub.user("replayer")
    idle = idle_cpu_rate(hub.process.pid)
    totals = {"native": [0.0, 0.0, 0.0], "official": [0.0, 0.0, 0.0]}  # wall, net, CPU (s)
    for k in range(pushes):
        for client, push in (("native", native_push), ("official", staged_push)):
            before, start = cpu_seconds(hub.process.pid), time.perf_counter()
            auth = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=hub.url, headers=auth, timeout=60) as http:
                push(http, "replayer", f"replay-{client}-{k}", "0.1.0")
            wall = time.perf_counter() - start
            cpu = cpu_seconds(hub.process.pid) - before
            totals[client][0] += wall
            totals[client][1] += cpu - idle * wall
            totals[client][2] += cpu
    per = {c: [1000 * value / pushes for value in values] for c, values in totals.items()}
    rows = [
        (
            f"{c} push protocol, replayed: wall / hub CPU",
            f"{w:.0f} ms / {net:.1f} ms ({cpu:.1f})",
            "",
        )
        for c, (w, net, cpu) in per.items()
    ]
    # a few quick pushes can read no CPU at all (psutil counts 10 ms ticks): no ratio then
    ratios = [
        f"{per['official'][i] / per['native'][i]:.2f}x" if per["native"][i] > 0 else "n/a"
        for i in (1, 2)
    ]
    rows.append(
        ("push protocol, official / native: hub CPU", f"{ratios[0]} ({ratios[1]})", "<= 1.5x")
    )
    return rows


def client_rows(costs: Costs) -> list[tuple[str, str, str]]:
    """The table's rows: each client's median wall time and mean hub CPU (less the idle rate;
    as measured in brackets) per push and install, and the official/native ratios (the push's
    against issue 40's 1.5x)."""
    rows = []
    for step in ("push", "install"):
        medians = {  # CPU: the mean, since each sample is in 10 ms ticks
            client: [
                statistics.median(sample.wall_s for sample in costs[client][step]),
                statistics.mean(sample.net_cpu_ms for sample in costs[client][step]),
                statistics.mean(sample.cpu_ms for sample in costs[client][step]),
            ]
            for client in costs
        }
        for client, (wall, net, cpu) in medians.items():
            rows.append(
                (
                    f"{client} `prime env {step}`: wall / hub CPU",
                    f"{wall:.2f} s / {net:.0f} ms ({cpu:.0f})",
                    "",
                )
            )
        ratios = [medians["official"][i] / medians["native"][i] for i in range(3)]
        rows.append(
            (
                f"{step}, official / native: wall, hub CPU",
                f"{ratios[0]:.2f}x, {ratios[1]:.2f}x ({ratios[2]:.2f}x)",
                "CPU <= 1.5x" if step == "push" else "",
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
    parser.add_argument("--versions", type=int, default=3, help="seeded per environment")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument(
        "--repeats", type=int, default=5, help="of each client command (0: no client runs)"
    )
    parser.add_argument("--pushes", type=int, default=100, help="of each protocol, replayed")
    parser.add_argument(
        "--clients-only",
        action="store_true",
        help="seed the hub, then measure only the two clients' push and install",
    )
    parser.add_argument(
        "--official-venv", type=Path, help="reuse (or make) the official client's venv here"
    )
    args = parser.parse_args()
    random.seed(0)
    work = stop_cleanly.scratch_dir("vf-hub-bench-")
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, work, True)
        extra = backend_flags(args.backend, work, stack)
        rows = (
            clients_measures(args, work, extra, stack)
            if args.clients_only
            else hub_measures(args, work, extra, stack)
        )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    title = f"Environments Hub, {args.backend} backend, {args.envs:,} environments, load {load}"
    table = Table(title=f"{title} (hub CPU less its idle rate; as measured in brackets)")
    for column in ("measure", "value", "target"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*row)
    Console(width=120).print(table)


def seeded_hub(args: argparse.Namespace, work: Path, extra: list[str], stack: ExitStack) -> tuple:
    """A hub holding ``args.envs`` environments of ``args.versions`` versions, seeded (``seed``)
    but for the first and the last 200 versions, pushed over HTTP and measured: (the hub, its
    owners, the empty hub's push measure, the full hub's, the seed's seconds)."""
    hub = Hub(work / "big", extra)
    stack.callback(hub.stop)
    owners = hub.owners(100)
    versions = ["1.0.0", "1.1.0", "2.0.0", *(f"2.{k}.0" for k in range(1, args.versions - 2))]
    jobs = jobs_for(owners, range(args.envs), versions[: args.versions])
    measured = min(200, args.envs, len(jobs) // 4)  # pushed over HTTP at each end
    first, rest = jobs[:measured], jobs[measured:]
    tail, fill = rest[-measured:], rest[:-measured]
    start_push = timed_pushes(hub, first)
    t0 = time.perf_counter()
    seed(hub, fill)
    seed_s = time.perf_counter() - t0
    end_push = timed_pushes(hub, tail)
    return hub, owners, start_push, end_push, seed_s


def clients_measures(
    args: argparse.Namespace, work: Path, extra: list[str], stack: ExitStack
) -> list[tuple[str, str, str]]:
    hub, _, _, _, seed_s = seeded_hub(args, work, extra, stack)
    rows = [("versions seeded (setup)", f"{args.versions * args.envs:,} in {seed_s:.0f} s", "")]
    return rows + protocol_rows(hub, args.pushes) + clients(hub, work, args)


def clients(hub: Hub, work: Path, args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """The two clients' rows (none with ``--repeats 0``)."""
    if args.repeats == 0:
        return []
    try:
        return client_rows(client_costs(hub, work, args.repeats, args.official_venv))
    except BackendUnavailable as exc:
        return [("official client push and install", "not measured", str(exc)[:60])]


def hub_measures(
    args: argparse.Namespace, work: Path, extra: list[str], stack: ExitStack
) -> list[tuple[str, str, str]]:
    small_search_cpu = small_hub_search_cpu(work, extra, args.seconds / 2)
    if args.backend != "embedded":  # a fresh database for the big hub
        stack.close()
        work.mkdir(parents=True, exist_ok=True)
        stack.callback(shutil.rmtree, work, True)
        extra = backend_flags(args.backend, work, stack)
    hub, owners, start_push, end_push, seed_s = seeded_hub(args, work, extra, stack)
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
    new_pages = new_page_urls(hub, owners, args.envs, pages)
    fresh_page = measure_each_once(hub, new_pages, 32) if new_pages else None
    page = measure(hub, pages, 32, args.seconds)
    rss = rss_mib(hub.process.pid)
    extra_jobs = jobs_for(
        owners, range(args.envs), [f"3.0.{k}" for k in range(1 + 4000 // args.envs)]
    )
    busy = index_while_pushing(hub, env_urls, extra_jobs, args.seconds)
    both_clients = protocol_rows(hub, args.pushes) + clients(hub, work, args)
    index_target = 2000 if args.backend == "embedded" else 1000
    total = args.versions * args.envs
    return [
        ("versions seeded (setup)", f"{total:,} in {seed_s:.0f} s", ""),
        ("simple index req/s, c=32", f"{index32['rate']:,.0f}", ""),
        ("simple index p99, c=32", f"{index32['p99']:.1f} ms", ""),
        ("simple index req/s, c=64", f"{index64['rate']:,.0f}", f">= {index_target:,}"),
        ("simple index server CPU/request", f"{index32['cpu_ms']:.2f} ms", ""),
        ("search p99 (p50), c=32", f"{search['p99']:.1f} ms ({search['p50']:.1f})", "<= 20 ms"),
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
        (
            "environment page p99 (p50), c=32",
            f"{page['p99']:.1f} ms ({page['p50']:.1f})",
            "<= 50 ms",
        ),
        ("environment page req/s, c=32", f"{page['rate']:,.0f}", ""),
        ("environment page server CPU/request", f"{page['cpu_ms']:.2f} ms", ""),
        (
            "environment page, every page new: p99 / CPU",
            f"{fresh_page['p99']:.1f} ms / {fresh_page['cpu_ms']:.2f} ms" if fresh_page else "n/a",
            "" if fresh_page else "every page is in the measure above",
        ),
        ("push rate, empty hub (c=4)", f"{start_push['rate']:.0f}/s", ""),
        (f"push rate at {total:,} versions (c=4)", f"{end_push['rate']:.0f}/s", ""),
        (
            "push server CPU, empty -> full",
            f"{start_push['cpu_ms']:.1f} -> {end_push['cpu_ms']:.1f} ms",
            f"<= 1.5x ({end_push['cpu_ms'] / start_push['cpu_ms']:.2f}x)",
        ),
        ("hub RSS after the load", f"{rss:.0f} MiB", ""),
        *both_clients,
        (
            "index req/s while 4 pushes run, c=32",
            f"{busy:,.0f} ({busy / index32['rate']:.2f}x idle)",
            ">= 0.7x",
        ),
    ]


if __name__ == "__main__":
    main()
