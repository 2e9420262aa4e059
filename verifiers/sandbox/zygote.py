"""The host's side of the sandbox zygote (``zygote_main``): one interpreter per host process,
started once with the worker's code loaded, from which each bubblewrap-mode sandbox's worker is
forked and then confined exactly as bubblewrap confines a cold one. A sandbox then pays a fork,
its namespaces and mounts, and its worker's set-up, not an interpreter's start (about half of a
cold start's CPU).

Used as root (no user namespace to map) and without ``network=True`` (slirp4netns is wired
through bubblewrap's ``--info-fd``); elsewhere a sandbox starts bubblewrap as before. A zygote
that died (killed, crashed) is replaced by the next start; the sandboxes it had forked die with
it (each has it as its parent-death signal's parent), and their next request fails as a crashed
sandbox's does.
"""

from __future__ import annotations

import array
import asyncio
import contextlib
import os
import re
import select
import signal
import socket
import subprocess
import threading
from functools import cache
from pathlib import Path

from verifiers.sandbox.base import SandboxError
from verifiers.sandbox.view import SANDBOX_ENV, sandbox_python, worker_code

ZYGOTE = Path(__file__).with_name("zygote_main.py")
MACHINES = ("x86_64", "aarch64")  # where zygote_main knows pivot_root's number
BOOTSTRAP = "import marshal,sys;i=sys.stdin.buffer;exec(marshal.loads(i.read(int(i.readline()))))"
START_TIMEOUT_S = 30.0
# Every symbol bound at the zygote's start, not on first call: a call first made in a snippet (its
# child's dup2, setpgid, setrlimit, compile...) otherwise had the dynamic linker resolve it and
# write the process's GOT again in every fork, about 13 page faults of copy-on-write a snippet.
# A worker's environment is the sandbox's own (``--clearenv``): this never reaches a snippet.
ZYGOTE_ENV = {**SANDBOX_ENV, "LD_BIND_NOW": "1"}


@cache
def _zygote_code() -> bytes:
    """The zygote's code as ``BOOTSTRAP`` reads it (compiled here, named ``<string>``)."""
    import importlib.machinery
    import marshal

    from verifiers.sandbox.view import _named

    loader = importlib.machinery.SourceFileLoader("_vf_sandbox_zygote", str(ZYGOTE))
    code = loader.get_code("_vf_sandbox_zygote")
    if code is None:
        raise SandboxError(f"no code in the sandbox zygote {ZYGOTE}")
    blob = marshal.dumps(_named(code, "<string>"))
    return b"%d\n" % len(blob) + blob


def usable() -> bool:
    """Whether sandboxes can be forked from a zygote here: as root (no user namespace to map),
    on a machine it knows, on a kernel with ``pidfd_open`` and ``mount_setattr`` (5.12)."""
    release = tuple(int(x) for x in re.findall(r"\d+", os.uname().release)[:2])
    return os.getuid() == 0 and os.uname().machine in MACHINES and release >= (5, 12)


class ZygoteProcess:
    """A worker the zygote forked, as ``LocalSandbox`` uses a process: its pid, its pipes, its
    exit. The host is not its parent: it holds a pidfd (signals reach exactly this process,
    never a reused pid) and learns of its exit from it; the exit status stays with the zygote
    (``returncode`` is -9 once it has exited)."""

    def __init__(
        self, pid: int, pidfd: int, stdin: asyncio.StreamWriter, stdout: asyncio.StreamReader
    ) -> None:
        self.pid, self.pidfd, self.stdin, self.stdout = pid, pidfd, stdin, stdout
        self._exited = False

    @property
    def returncode(self) -> int | None:
        if not self._exited and self.pidfd >= 0:
            poll = select.poll()  # readable once it has exited (any descriptor number)
            poll.register(self.pidfd, select.POLLIN)
            self._exited = bool(poll.poll(0))
        return -9 if self._exited else None

    def kill(self) -> None:
        """SIGKILL the worker: pid 1 of its namespace, so every process of the sandbox goes."""
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)

    def __del__(self) -> None:  # a start abandoned before anything waited for it
        if self.pidfd >= 0:
            os.close(self.pidfd)

    async def wait(self) -> int:
        while self.returncode is None:
            loop = asyncio.get_running_loop()
            exited: asyncio.Future[None] = loop.create_future()
            loop.add_reader(self.pidfd, _settle, exited)
            try:
                await exited
            finally:
                loop.remove_reader(self.pidfd)
        self.stdin.close()
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1
        return -9


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Zygote:
    """One zygote process and its control socket (a ``SOCK_SEQPACKET`` pair: one message, one
    request or reply, descriptors attached)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._socket: socket.socket | None = None

    def _start(self) -> socket.socket:
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        python = sandbox_python("bwrap")
        try:
            self._process = subprocess.Popen(
                [python.executable, "-I", "-S", "-c", BOOTSTRAP],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=ZYGOTE_ENV,
                cwd="/",
                pass_fds=[child.fileno()],
                start_new_session=True,
            )
            assert self._process.stdin is not None
            self._process.stdin.write(_zygote_code() + b"%d\n" % child.fileno() + worker_code())
            self._process.stdin.close()
        finally:
            child.close()
        host.settimeout(START_TIMEOUT_S)
        try:
            ready = host.recv(16)
        except OSError:
            ready = b""
        if ready != b"ready":
            host.close()
            self._stop()
            raise SandboxError(f"the sandbox zygote ({python.executable}) did not start")
        host.settimeout(None)
        self._socket = host
        return host

    def _ensure(self) -> socket.socket:
        """The running zygote's socket, after starting one if none runs (the lock is held)."""
        sock = self._socket
        if sock is None or (self._process is not None and self._process.poll() is not None):
            self._stop()
            sock = self._start()
        return sock

    def prestart(self) -> None:
        """Start the zygote now unless one runs; a failure is left for the first fork to meet."""
        with self._lock, contextlib.suppress(SandboxError, OSError):
            self._ensure()

    def _stop(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            self._process.wait()
            self._process = None

    def fork(self, stdin: int, stdout: int, options: int) -> tuple[int, int]:
        """A new worker on these descriptors, confined by these options: its pid and pidfd.
        A zygote that died is replaced once, here."""
        with self._lock:
            for attempt in (1, 2):
                sock = self._ensure()
                try:
                    fds = array.array("i", [stdin, stdout, options])
                    sock.sendmsg([b"fork"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
                    message, ancillary, _, _ = sock.recvmsg(32, socket.CMSG_SPACE(4))
                except OSError:
                    message, ancillary = b"", []
                if message:
                    break
                self._stop()  # it died mid-request: a fresh one, once
                if attempt == 2:
                    raise SandboxError("the sandbox zygote died twice in a row")
        received = array.array("i")
        for _, _, data in ancillary:
            received.frombytes(data[: len(data) - len(data) % received.itemsize])
        if message.startswith(b"error") or len(received) != 1:
            for fd in received:
                os.close(fd)
            raise SandboxError(f"the sandbox zygote could not fork a worker ({message.decode()})")
        return int(message), received[0]

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _forget(self) -> None:
        """In a forked child: the parent's zygote stays the parent's (its socket is shared with
        the parent, which reads its replies); the child starts one of its own when it needs it."""
        self._lock = threading.Lock()
        if self._socket is not None:
            self._socket.close()  # this process's copy only
        self._socket, self._process = None, None


_zygote = Zygote()
os.register_at_fork(after_in_child=_zygote._forget)


async def spawn(options: int) -> ZygoteProcess:
    """Fork a worker from this process's zygote (started on first use), confined by the
    bubblewrap options in the pipe ``options`` (closed here), with pipes to this process."""
    to_worker, worker_stdin = os.pipe()
    worker_stdout, from_worker = os.pipe()
    try:
        pid, pidfd = await asyncio.to_thread(_zygote.fork, to_worker, from_worker, options)
    except BaseException:
        os.close(worker_stdin)
        os.close(worker_stdout)
        raise
    finally:
        for fd in (to_worker, from_worker, options):
            os.close(fd)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26, loop=loop)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(worker_stdout, "rb", 0)
    )
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()),
        os.fdopen(worker_stdin, "wb", 0),
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return ZygoteProcess(pid, pidfd, writer, reader)


def prestart() -> None:
    """Start this process's zygote in the background (a provider does when it is made), so the
    first sandbox of a run need not wait for its interpreter."""
    if zygote_pid() is None:
        threading.Thread(target=_zygote.prestart, name="vf-sandbox-zygote", daemon=True).start()


def stop() -> None:
    """Stop this process's zygote (the next sandbox starts a fresh one)."""
    _zygote.close()


def zygote_pid() -> int | None:
    """The running zygote's pid, if one runs."""
    process = _zygote._process
    return process.pid if process is not None and process.poll() is None else None
