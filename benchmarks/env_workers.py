"""Environment workers against in-process runs, on the same scripted model server.

    python benchmarks/env_workers.py            # full table (about 2 minutes on 2 cores)
    python benchmarks/env_workers.py --quick    # 1/5 of the rollouts
    python benchmarks/env_workers.py --bounds-only [--quick]   # vf-env-server's bounds alone

Two workloads, each cell in a fresh process so its numbers are its own:

- a rubric with a 20 ms blocking sync reward (``time.sleep``: a slow checker or tokenizer), run in
  process and at 1, 2 and 4 workers (target: at least 1.8x in-process at 2 workers on 2 cores);
- the plain single-turn workload (2,000 rollouts, concurrency 256), in process and on the default
  worker path (``--env-workers auto``), for the cost of the default (target: at least 0.8x).

A third table is what vf-env-server's bounds cost (``--bounds-only`` runs it alone): the per-peer
gate in front of the ROUTER, the decode-cost bound and the stepped decode and validation of large
requests, against the same server built without them inside this benchmark (the ROUTER on TCP,
a plain decode and one ``model_validate``), both with one worker and the secret. The figure is
the server process's CPU per request (its workers are children, not counted), the two servers
taking turns (``cpu_ab``): health pings, one-rollout groups sent by ``RemoteWorkers``, and 8 MiB
``run_group`` requests refused after validation (their rows are never run: decode, validation
and the relay are all the server does, so the bounds weigh the most there). Target: on / off
<= 1.05.

Rollouts/s counts from the moment the workers are ready; starting them (a fresh interpreter
each, loading the environment) is shown apart, since a run pays it once. Peak RSS is that of the whole process tree (caller and workers, sampled every 20 ms), not of the
caller alone. The environment is a module written to a temporary directory and loaded by id, as
workers load every environment.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil
import stop_cleanly  # beside this script

MODEL = "bench-model"

ENV_SOURCE = '''
import time
import verifiers as vf


def exact(completion, answer) -> float:
    return float(completion[-1]["content"] == answer)


def slow_check(completion) -> float:
    """A blocking sync reward: 20 ms during which its event loop does nothing else."""
    time.sleep(0.02)
    return 1.0


def load_environment(kind="plain", n=2000):
    rows = [{"question": f"prompt number {i}: please repeat this", "answer": f"prompt number {i}: please repeat this"} for i in range(n)]
    funcs = [exact, slow_check] if kind == "blocking" else [exact]
    return vf.SingleTurnEnv(dataset=rows, rubric=vf.Rubric(funcs=funcs))
'''


def cell_worker(url: str, kind: str, n: int, concurrency: int, workers: str) -> dict:
    import asyncio

    import verifiers as vf
    from verifiers.workers import start_workers

    async def run() -> dict:
        env = vf.load_environment("bench-env-workers", kind=kind, n=n)
        started = time.perf_counter()
        pool = None if workers == "none" else await start_workers(workers, env)
        start = time.perf_counter()
        try:
            out = await env.evaluate(url, MODEL, max_concurrent=concurrency, env_workers=pool)
        finally:
            wall = time.perf_counter() - start
            if pool is not None:
                await pool.close()
        assert len(out) == n, "every rollout is kept"
        errors = sum(1 for s in out.state if s["error"])
        return {"rollouts": len(out), "wall": wall, "start": start - started, "errors": errors}

    return asyncio.run(run())


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_cell(url: str, env_dir: str, kind: str, n: int, concurrency: int, workers: str) -> dict:
    cmd = [sys.executable, __file__, "--cell", kind, "--url", url, "-n", str(n)]
    cmd += ["-c", str(concurrency), "--workers", workers]
    env = {**os.environ, "PYTHONPATH": f"{env_dir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    peak, done = 0, threading.Event()

    def sample() -> None:
        nonlocal peak
        proc = psutil.Process(child.pid)
        while not done.is_set():
            try:
                peak = max(peak, tree_rss(proc))
            except psutil.Error:
                return
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, _ = child.communicate()
    done.set()
    sampler.join()
    if child.returncode:
        raise SystemExit(f"cell {kind} workers={workers} failed (exit {child.returncode})")
    result = json.loads(stdout.strip().splitlines()[-1])
    result["tree_rss_mb"] = peak / 2**20
    return result


BOUNDS_ROWS = 256
"""Rows of the environment the bounds' servers load (one-rollout groups of them are run)."""
WINDOW = 500
"""Pipelined requests in flight at most (under a ROUTER's high-water mark of 1,000)."""


def serve_unbounded(argv: list[str]) -> None:
    """vf-env-server without its bounds, for the comparison only: the command itself (same
    settings, logging, pool and answers), its server class swapped for one with the ROUTER on
    TCP itself (no gate) and each request decoded and validated in one go, no cost bound."""
    import verifiers.workers.server as env_server
    from verifiers.cli.env_server import main as vf_env_server
    from verifiers.workers.protocol import parse_request, unpack

    class Unbounded(env_server.EnvServer):
        async def _open_front_door(self, router: Any) -> Callable[[], Awaitable[None]]:
            router.bind(f"tcp://{self.host}:{self.port}")

            async def close() -> None:
                return None

            return close

        async def _read_request(self, payload: bytes) -> Any:
            return parse_request(unpack(payload))

    env_server.EnvServer = Unbounded  # type: ignore[misc]
    vf_env_server(argv)


def large_request(megabytes: int) -> bytes:
    """A ``run_group`` of ``megabytes`` MiB of rows, with a client config that names a key
    variable the server does not read: decoded, validated, then refused (no rollout runs)."""
    from verifiers.workers.protocol import pack

    row = {"question": "q" * 400, "answer": "a" * 16, "info": {"i": 0}}
    count = megabytes * 2**20 // len(pack(row))
    config = {"api_key_var": "HOME", "api_base_url": "http://127.0.0.1:9/v1"}
    frame = {"request_type": "run_group", "group_inputs": [row] * count, "model": MODEL}
    return pack({**frame, "client_config": config})


def bounds_table(url: str, env_dir: str, quick: bool) -> Any:
    """What vf-env-server's bounds cost: server CPU per request, bounds on against off."""
    import asyncio
    import secrets

    import zmq
    import zmq.asyncio
    from cpu_ab import BOUNDS_COLUMNS, Side, bounds_row, interleaved
    from rich.table import Table

    import verifiers as vf
    from verifiers.processes.server import free_port, stop_process
    from verifiers.workers.auth import secure_client
    from verifiers.workers.protocol import HEALTH_PING, unpack
    from verifiers.workers.remote import RemoteWorkers

    if env_dir not in sys.path:  # the environment module, as the cells and servers find it
        sys.path.insert(0, env_dir)
    scratch = stop_cleanly.scratch_dir("vf-bench-bounds-")
    secret_file = scratch / "secret"
    secret_file.write_text(secrets.token_hex(32))
    secret_file.chmod(0o600)
    secret = secret_file.read_text()
    env = {**os.environ, "PYTHONPATH": f"{env_dir}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    ports = {"on": free_port(), "off": free_port()}
    args = json.dumps({"kind": "plain", "n": BOUNDS_ROWS})

    def flags(side: str) -> list[str]:
        return [
            *("bench-env-workers", "--port", str(ports[side]), "--workers", "1"),
            *("--secret-file", str(secret_file), "--env-args", args),
        ]

    commands = {
        "on": [sys.executable, "-m", "verifiers.cli.env_server", *flags("on")],
        "off": [sys.executable, __file__, "--serve-unbounded", *flags("off")],
    }
    servers = {
        side: subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        for side, cmd in commands.items()
    }
    loop = asyncio.new_event_loop()
    context = zmq.asyncio.Context()
    dealers: dict[str, Any] = {}
    callers: dict[str, RemoteWorkers] = {}
    try:
        for server in servers.values():
            server.stdout.readline()  # its workers are up
        environment = vf.load_environment("bench-env-workers", kind="plain", n=BOUNDS_ROWS)
        for side, port in ports.items():
            dealers[side] = context.socket(zmq.DEALER)
            secure_client(dealers[side], secret)
            dealers[side].connect(f"tcp://127.0.0.1:{port}")
            callers[side] = loop.run_until_complete(
                RemoteWorkers([f"127.0.0.1:{port}"], secret).start()
            )

        def pipelined(side: str, frame: bytes, count: int) -> Callable[[], int]:
            async def send() -> int:
                dealer = dealers[side]
                # at most WINDOW requests unanswered: a ROUTER drops the answers a caller leaves
                # unread past its high-water mark (1,000), and a server answering pings as fast
                # as 4,000 were sent filled it (the caller then waited for answers dropped)
                window = asyncio.Semaphore(WINDOW)

                async def read() -> None:
                    for _ in range(count):
                        assert await dealer.poll(300_000), f"{side}: no answer"
                        _, reply = await dealer.recv_multipart()
                        window.release()
                        if frame != HEALTH_PING:  # refused: after validation, or at once
                            assert not unpack(reply)["success"], unpack(reply)

                reading = asyncio.ensure_future(read())
                for i in range(count):
                    await window.acquire()
                    await dealer.send_multipart([str(i).encode(), frame])
                await reading
                return count

            return lambda: loop.run_until_complete(send())

        def groups(side: str) -> Callable[[], int]:
            async def run() -> int:
                out = await environment.evaluate(
                    url, MODEL, max_concurrent=16, env_workers=callers[side]
                )
                assert not any(s["error"] for s in out.state), "every rollout succeeds"
                return len(out)

            return lambda: loop.run_until_complete(run())

        rounds = 4 if quick else 8
        large_mb = 2 if quick else 8
        workloads = [
            (
                "health ping (pipelined)",
                lambda side: pipelined(side, HEALTH_PING, 1000 if quick else 4000),
            ),
            (f"one-rollout group ({BOUNDS_ROWS} a batch)", groups),
            (
                f"{large_mb} MiB run_group, refused after validation",
                lambda side: pipelined(side, large_request(large_mb), 2 if quick else 4),
            ),
            (
                f"{large_mb} MiB frame, refused at its 2nd byte (relay)",
                lambda side: pipelined(side, b"\x01" * (large_mb << 20), 2 if quick else 4),
            ),
        ]
        table = Table(title="vf-env-server's bounds (gate, decode bound, stepped validation)")
        for col in BOUNDS_COLUMNS:
            table.add_column(col, justify="right")
        for name, batch in workloads:
            on, off = (Side(servers[side].pid, batch(side)) for side in ("on", "off"))
            on.batch(), off.batch()  # warm up: imports, caches, connections
            table.add_row(*bounds_row(name, *interleaved(on, off, rounds)))
        return table
    finally:
        for caller in callers.values():
            loop.run_until_complete(caller.close())
        for dealer in dealers.values():
            dealer.close(linger=0)
        context.term()
        loop.close()
        for server in servers.values():
            stop_process(server)


def main() -> None:
    stop_cleanly.install()
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="a fifth of the rollouts")
    parser.add_argument("--cell", choices=["blocking", "plain"], help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("-n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("-c", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--workers", help=argparse.SUPPRESS)
    parser.add_argument(
        "--bounds-only", action="store_true", help="only the table of vf-env-server's bounds"
    )
    if sys.argv[1:2] == ["--serve-unbounded"]:
        serve_unbounded(sys.argv[2:])
        return
    args = parser.parse_args()
    if args.cell:
        print(json.dumps(cell_worker(args.url, args.cell, args.n, args.c, args.workers)))
        return

    from rich.console import Console
    from rich.table import Table

    scale = 5 if args.quick else 1
    env_dir = str(stop_cleanly.scratch_dir("vf-bench-env-"))
    Path(env_dir, "bench_env_workers.py").write_text(ENV_SOURCE)
    server = subprocess.Popen(
        [sys.executable, "-m", "verifiers.testing"], stdout=subprocess.PIPE, text=True
    )
    console = Console(width=150)
    try:
        url = server.stdout.readline().split()[1]
        table = Table(title=f"environment workers vs in process ({os.cpu_count()} cores)")
        for col in ("workload", "rollouts", "conc", "workers", "start s", "rollouts/s"):
            table.add_column(col, justify="right")
        table.add_column("vs in process", justify="right")
        for col in ("tree peak RSS MB", "errors"):
            table.add_column(col, justify="right")
        checks: list[str] = []
        workloads = (
            ("blocking", "20 ms sync reward", 400 // scale, 64, ("none", "1", "2", "4")),
            ("plain", "single-turn", 2000 // scale, 256, ("none", "auto")),
        )
        if args.bounds_only:
            workloads = ()
        for kind, label, n, conc, settings in workloads:
            base_rate = None
            for workers in settings:
                cell = run_cell(url, env_dir, kind, n, conc, workers)
                rate = cell["rollouts"] / cell["wall"]
                base_rate = base_rate or rate
                table.add_row(
                    label,
                    str(cell["rollouts"]),
                    str(conc),
                    "in process" if workers == "none" else workers,
                    f"{cell['start']:.1f}",
                    f"{rate:,.0f}",
                    f"{rate / base_rate:.2f}x",
                    f"{cell['tree_rss_mb']:.0f}",
                    str(cell["errors"]),
                )
                if kind == "blocking" and workers == "2":
                    checks.append(
                        f"blocking reward at 2 workers: {rate / base_rate:.2f}x (target >= 1.8x)"
                    )
                if kind == "plain" and workers == "auto":
                    checks.append(
                        f"single-turn on the default worker path: {rate / base_rate:.2f}x (target >= 0.8x)"
                    )
        if not args.bounds_only:
            console.print(table)
            for line in checks:
                console.print(line)
        console.print(bounds_table(url, env_dir, args.quick))
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
