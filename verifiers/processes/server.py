"""Run ``vf-serve`` as a child process on a free loopback port, and stop it reliably."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from verifiers.processes.die_with_parent import guarded

# How the launcher hands a server its weight-update secret and trusted directories (read there by
# verifiers.weights.access, which re-exports them).
SECRET_ENV = "VF_WEIGHTS_SECRET"
TRUSTED_ENV = "VF_TRUSTED_WEIGHTS_DIRS"
# ... and the key every route but /health then requires (read by verifiers.cli.serve)
API_KEY_ENV = "VF_SERVE_API_KEY"
# The descriptor of the listening socket the launcher made and hands a vf-serve child: the port is
# held from before the child starts, so no other local process can bind it first (one did, while
# the child started, and vf-eval sent its prompts to it and scored its answers).
LISTEN_FD_ENV = "VF_SERVE_LISTEN_FD"


@dataclass
class ServerProcess:
    process: subprocess.Popen
    base_url: str
    model: str
    log_path: Path
    weights_secret: str | None = None  # what weight-update requests must carry (see weight_access)
    api_key: str | None = None  # what every request but /health must carry as a bearer token

    def stop(self, timeout: float = 10.0) -> None:
        stop_process(self.process, timeout)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_process(process: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM a child and reap it; SIGKILL it if it is still there after ``timeout`` seconds
    (every server this SDK and the hub start, and the tests' PostgreSQL, stop this way)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def listening_socket(host: str = "127.0.0.1") -> socket.socket:
    """A socket listening on a free port of ``host``, to hand to a server child (no window in
    which the port is free for another process, as :func:`free_port`'s has). An IPv6 ``host``
    (``::``) listens as uvicorn's own socket would, IPv4 too where the system allows."""
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        listener.bind((host, 0))
        listener.listen(2048)
    except OSError:
        listener.close()
        raise
    return listener


def start_server(
    model: str,
    *,
    log_path: Path,
    timeout: float = 300.0,
    extra_args: list[str] | None = None,
    env_overrides: dict[str, str] | None = None,
    weights_secret: str | None = None,
    trusted_weights_dirs: list[Path] | None = None,
    api_key: str | None = None,
) -> ServerProcess:
    """Start ``vf-serve MODEL`` and wait until it answers ``/health`` (or fail with its log).

    ``weights_secret`` turns the weight-update routes on (handed over in the child's environment,
    never its argv); ``trusted_weights_dirs`` are where ``/v1/weights/load`` may read;
    ``api_key`` (the same way) makes every other route refuse a request without it, so a server
    meant for one client (a trainer) answers no other local user.
    """
    args = ["--host", "127.0.0.1", *(extra_args or [])]
    hosts = [value for flag, value in itertools.pairwise(args) if flag == "--host"]
    listener = listening_socket(hosts[-1])  # the last --host, as vf-serve's argparse reads it
    port = listener.getsockname()[1]
    # A trainer beside the server passes {"OMP_WAIT_POLICY": "PASSIVE"}: two processes with
    # spinning OpenMP threads slow each other down many times over. A light client (vf-eval)
    # does not, and spinning is ~25% faster for the server alone.
    env = dict(os.environ)
    env.pop(API_KEY_ENV, None)  # a key of the caller's environment is not this server's
    env.update(env_overrides or {})
    env.pop(SECRET_ENV, None)
    env[LISTEN_FD_ENV] = str(listener.fileno())
    if weights_secret is not None:
        env[SECRET_ENV] = weights_secret
    if api_key is not None:
        env[API_KEY_ENV] = api_key
    if trusted_weights_dirs:
        env[TRUSTED_ENV] = os.pathsep.join(str(Path(d).resolve()) for d in trusted_weights_dirs)
    cmd = [
        sys.executable,
        "-m",
        "verifiers.cli.serve",
        model,
        "--port",
        str(port),
        *args,
    ]
    with listener:  # the child has its own copy of the descriptor
        server = launch(
            cmd,
            port=port,
            log_path=log_path,
            env=env,
            timeout=timeout,
            pass_fds=(listener.fileno(),),
        )
    server.weights_secret, server.api_key = weights_secret, api_key
    return server


def _listens(process: subprocess.Popen, port: int) -> bool:
    """Whether ``process`` or one of its descendants listens on ``port`` (read from /proc): a
    server that binds its port itself (vLLM) has it taken by whoever binds it first, and
    whatever answers ``/health`` there would be sent the run's key and prompts."""
    listeners = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:  # sl local_address rem_address st ... uid timeout inode
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                listeners.add(f"socket:[{fields[9]}]")
    if not listeners:
        return False
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:  # "pid (comm) state ppid ...": comm may hold spaces and parentheses
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    tree, grown = {process.pid}, True
    while grown:
        more = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= more
        grown = bool(more)
    for pid in tree:
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in descriptors:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in listeners:
                    return True
            except OSError:
                continue
    return False


def launch(
    cmd: list[str],
    *,
    port: int,
    log_path: Path,
    env: dict[str, str],
    timeout: float,
    model: str | None = None,
    pass_fds: tuple[int, ...] = (),
) -> ServerProcess:
    """Start an OpenAI-compatible server (vf-serve, vLLM) on 127.0.0.1:``port``; ready when
    ``/health`` answers 200. The served name comes from /health (vf-serve) or ``model``. A
    server handed its listening socket (``pass_fds``) holds the port from the start; one that
    binds it itself is ready only if the answer comes from its own process tree.

    The server is sent SIGTERM when the thread that called this exits (Linux parent-death
    signal), so call it from the main thread or one that lives as long as the server."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("wb")
    # the server goes when this process goes, even by SIGKILL (see verifiers.processes.die_with_parent)
    argv, parent = guarded(cmd)
    process = subprocess.Popen(
        argv,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**env, **parent},
        start_new_session=True,
        pass_fds=pass_fds,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.close()
            tail = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"the model server exited with code {process.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                if resp.status == 200:
                    if not pass_fds and not _listens(process, port):
                        process.kill()
                        process.wait()
                        log.close()
                        raise RuntimeError(
                            f"127.0.0.1:{port} answers, but no process of the model server "
                            "listens there: another process took the port while the server "
                            "started; nothing was sent to it (start again)"
                        )
                    body = resp.read()
                    name = json.loads(body)["model"] if body.startswith(b"{") else model
                    return ServerProcess(process, base_url, name or "", log_path)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    process.kill()
    raise RuntimeError(
        f"the model server did not become ready within {timeout:.0f}s; see {log_path}"
    )
