"""Upload work (archive checks, hashing, storing, the publish transaction) in worker processes
of a lower CPU priority.

Threads would share the hub's interpreter lock with the event loop that answers reads, so a
push's pure-Python checks took the index's turn whatever its thread's priority. A process of its
own has its own lock, and at nice 10 the kernel gives the cores to the reads first. Each worker
opens the same store as the hub (its database and blob store, from the same settings); nothing
it writes is cached by the hub, which reads every serial and generation from the database.

What crosses to a worker must pickle: uploaded files go as paths (the multipart parser's spool
is copied to a temporary file first), database rows as dicts, and a ``HubError`` keeps its
status and code on the way back.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import select
import shutil
import signal
import sqlite3
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from hub_server.background import forks
from hub_server.errors import HubError
from hub_server.settings import HubSettings
from verifiers.processes.leftovers import owned_dir, remove_abandoned

UPLOAD_WORKERS = 2
UPLOAD_NICENESS = 10  # the CPU goes to reads first when both want it

_worker_hub: Any = None  # the Hub of this worker process (set by the initializer)


@dataclass
class Upload:
    """One uploaded file, spooled by the multipart parser (in memory, or on disk when large)."""

    filename: str
    file: BinaryIO


@dataclass(frozen=True)
class StoredUpload:
    """An uploaded file as it crosses to a worker: its bytes (a small one) or a path."""

    filename: str
    path: str | None = None
    data: bytes | None = None


class UploadPool:
    """The hub's upload workers: started with the hub's server (``start``) or, in a hub used
    in-process, on its first upload; gone with the hub, even when it is killed (``_exit_with``)."""

    def __init__(
        self,
        settings: HubSettings,
        open_hub: Callable[[HubSettings], Any],
        workers: int = UPLOAD_WORKERS,
    ) -> None:
        """``open_hub(settings)``: a worker's own hub (a module-level function, so that it
        pickles by name; the pool never imports the hub, which owns it)."""
        self.settings, self.open_hub, self.workers = settings, open_hub, workers
        self._executor: ProcessPoolExecutor | None = None
        self._spool: Path | None = None  # made on the first upload too large for memory

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                self.workers,
                mp_context=forks.context(),
                initializer=_start_worker,
                initargs=(self.open_hub, self.settings.model_dump(), os.getpid()),
            )
        return self._executor

    def spool(self) -> Path:
        """Where large uploads are copied for the workers: under the hub's data dir, one
        directory per hub process, removed when the hub closes (and, when a hub was killed
        outright, by the next hub process that spools)."""
        if self._spool is None:
            root = Path(self.settings.data_dir) / "upload-spool"
            root.mkdir(parents=True, exist_ok=True)
            remove_abandoned(root, "")
            self._spool = owned_dir("", root)
        return self._spool

    def start(self) -> None:
        """Start the workers now (their imports run in them, in the background), so the
        first push does not wait for them."""
        pool = self._pool()
        for _ in range(self.workers):
            pool.submit(os.getpid)

    async def run(self, fn: Any, *args: Any) -> Any:
        """``fn(worker_hub, *args)`` in a worker; uploads and rows in ``args`` are made
        portable first, and removed from the spool when the work is done."""
        loop = asyncio.get_running_loop()
        made: list[str] = []
        portable = []
        for arg in args:
            if isinstance(arg, Upload):
                arg.file.seek(0)
                if getattr(arg.file, "_rolled", True):  # spooled to disk: copy off the loop
                    arg = await loop.run_in_executor(None, _stage, arg, self.spool(), made)
                else:  # small, in memory: its bytes travel with the call
                    arg = StoredUpload(arg.filename, data=arg.file.read())
            elif isinstance(arg, sqlite3.Row):
                arg = dict(arg)
            portable.append(arg)
        pool = self._pool()
        try:
            return await loop.run_in_executor(pool, _call, fn, portable)
        except BrokenProcessPool:  # a worker died (OOM, a kill): the next upload gets new ones
            if self._executor is pool:  # not a fresh pool another upload has made since
                self._executor = None
            pool.shutdown(wait=False, cancel_futures=True)
            raise HubError(
                503, "upload_worker_failed", "the upload's worker process died; push again"
            ) from None
        finally:
            for path in made:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
        if self._spool is not None:
            shutil.rmtree(self._spool, ignore_errors=True)
            self._spool = None


def _stage(upload: Upload, spool: Path, made: list[str]) -> StoredUpload:
    with tempfile.NamedTemporaryFile(dir=spool, delete=False) as out:
        made.append(out.name)
        shutil.copyfileobj(upload.file, out, 1024 * 1024)
    return StoredUpload(upload.filename, path=out.name)


def _start_worker(
    open_hub: Callable[[HubSettings], Any], settings: dict[str, Any], hub_pid: int
) -> None:
    """A worker's start: end with the hub, yield the CPU to it, open the same store. (A worker
    also ends when the hub closes the pool, after the task in hand, which commits whole or not
    at all.)"""
    global _worker_hub
    _exit_with(hub_pid)
    with contextlib.suppress(OSError):
        os.nice(UPLOAD_NICENESS)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the hub, which stops us
    _worker_hub = open_hub(HubSettings.model_validate(settings))


def _exit_with(hub_pid: int) -> None:
    """Exit as soon as the hub's process is gone, however it went. A pool's workers hold the
    write ends of their own queues (and of the fork server's liveness pipe), so a hub killed by
    SIGKILL or the OOM killer would leave them waiting forever, holding the store open; nor
    can a parent-death signal tell, since a worker's parent is the fork server."""
    try:
        hub = os.pidfd_open(hub_pid)
    except ProcessLookupError:  # gone before this worker started
        os._exit(1)

    def watch() -> None:
        select.select([hub], [], [])  # a pidfd reads ready when its process has exited
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-the-hub", daemon=True).start()


def _call(fn: Any, args: list[Any]) -> Any:
    opened = []
    real = []
    for arg in args:
        if isinstance(arg, StoredUpload):
            file: BinaryIO
            if arg.path is None:
                file = io.BytesIO(arg.data or b"")
            else:
                file = open(arg.path, "rb")  # closed below, after the work
            opened.append(file)
            real.append(Upload(arg.filename, file))
        else:
            real.append(arg)
    try:
        result = fn(_worker_hub, *real)
    finally:
        for file in opened:
            file.close()
    return dict(result) if isinstance(result, sqlite3.Row) else result


def worker_identity(hub: Any) -> tuple[int, int, int]:
    """The worker's pid, parent pid and niceness: what an operator (or a test) checks."""
    return os.getpid(), os.getppid(), os.getpriority(os.PRIO_PROCESS, 0)
