"""Run a hub as a child process on a loopback port and wait until it answers (tests, benchmarks)."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from verifiers.processes.server import free_port, stop_process


@dataclass
class HubProcess:
    process: subprocess.Popen
    url: str
    data_dir: Path

    def stop(self, timeout: float = 10.0) -> None:
        stop_process(self.process, timeout)

    def kill(self) -> None:
        """SIGKILL, as a crash would: nothing gets to clean up."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def __enter__(self) -> HubProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_hub(
    data_dir: Path,
    port: int | None = None,
    timeout: float = 120.0,
    backend: list[str] | None = None,
    extra: list[str] | None = None,
    sdk: bool = False,
) -> HubProcess:
    """``backend``: the serve flags of a storage backend (``--db URL --blobs URL ...``); no SDK
    wheel is built unless ``sdk`` (each build costs seconds of CPU). ``timeout`` bounds a hub
    that never answers, not how fast one starts: on two busy cores a start takes many seconds."""
    port = port or free_port()
    cmd = [
        sys.executable,
        "-m",
        "hub_client.cli",
        "hub",
        "serve",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        *(backend or []),
        *(extra or []),
        *([] if sdk else ["--no-sdk"]),
    ]
    log = tempfile.TemporaryFile()  # a file, not a pipe: nobody reads it while the hub runs
    process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return HubProcess(process, url, data_dir)
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            log.seek(0)
            stderr = log.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"the hub did not start on {url} (exit {process.poll()}): {stderr}")
        time.sleep(0.1)
