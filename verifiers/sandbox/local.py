"""Local sandboxes on Linux: bubblewrap namespaces by default, Landlock as the fallback.

Isolation, in layers:
- ``bwrap``: private pid/net/mount/ipc/uts namespaces; read-only ``/usr`` and interpreter; a private
  work dir and ``/tmp``; ``--die-with-parent``, ``--new-session``; all capabilities dropped except
  setuid/setgid, which the worker spends at once to become a distinct unprivileged uid (when the
  host runs as root) before any user code. As root, the worker is forked from this process's
  zygote (``verifiers.sandbox.zygote``), which applies the same options itself.
- ``landlock`` (no namespaces available): the same worker, with Landlock filesystem rules, the uid
  drop and a child subreaper instead of the namespaces. The sandbox uid must be able to reach the
  interpreter: when this one lives somewhere private (pyenv under /root), a system Python of the
  same version (or ``VF_SANDBOX_PYTHON``) runs the worker instead.
- always: per-snippet rlimits (CPU, memory, processes, file size, open files), the seccomp filter
  of ``verifiers.sandbox.seccomp`` (no ``socket(2)`` at all, so no network and no host IPC; no
  ptrace/mount/unshare/bpf/modify_ldt/...), a wall-clock kill, a sweep of leftover processes
  after each snippet, a budget (``verifiers.sandbox.budget``) and, as root, one disk for the
  work dir and ``/tmp`` together and a uid of its own (``verifiers.sandbox.uids``).
- ``network=True`` (bwrap only): a network namespace of its own, wired by slirp4netns without
  the host's loopback (``verifiers.sandbox.network``).
- ``unsafe``: no isolation, for trusted code only; never chosen automatically.

The mode is probed once per process (``verifiers.sandbox.provider``) and logged; environments
record it in results metadata.

Over 400 lines, not split: one class, ``LocalSandbox``, whose start, transfers and stop share
its namespace setup; the worker, the seccomp filter, budgets and the network are modules of
their own.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from verifiers.processes.leftovers import abandoned, owned_dir, pinned
from verifiers.sandbox import seccomp, zygote
from verifiers.sandbox.base import (
    ExecResult,
    IsolationMode,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxUnavailableError,
)
from verifiers.sandbox.budget import Budget, mount_disk, unmount_disk
from verifiers.sandbox.network import RESOLV_CONF, connect, slirp4netns
from verifiers.sandbox.uids import UidClaim
from verifiers.sandbox.view import (
    BOOTSTRAP,
    SAFE_PATH,
    SANDBOX_ENV,
    package_dirs,
    sandbox_python,
    system_binds,
    uid_drop_possible,
    with_parents,
    without,
    worker_code,
)
from verifiers.sandbox.zygote import ZygoteProcess
from verifiers.sandbox.zygote import usable as zygote_usable

logger = logging.getLogger("verifiers.sandbox")
HOST_DIR_PREFIX = "vf-sandbox-"  # then the maker: verifiers.processes.leftovers

__all__ = ["LocalSandbox", "SandboxUnavailableError"]

# Held strongly until destroyed: a sandbox whose object is gone would leave its process running
# with nothing to kill it (the exit hook walks this set).
_live: set[LocalSandbox] = set()
_made_dirs = False  # this process made a sandbox directory: the exit hook sweeps for its own


class LocalSandbox(Sandbox):
    """One sandbox: its worker process in its isolation, with its own uid (as root), budget
    (cgroup), disk (one tmpfs for its work dir and ``/tmp`` together) and, for
    ``network=True``, its own network."""

    def __init__(self, mode: IsolationMode, limits: SandboxLimits, zygote: bool = True) -> None:
        self.mode = mode
        self.limits = limits
        # forked from this process's zygote (``verifiers.sandbox.zygote``) where it confines as
        # bubblewrap would: as root, without network=True; else bubblewrap starts the worker
        self.zygote = zygote and mode == "bwrap" and not limits.network and zygote_usable()
        if limits.network and mode == "landlock":
            raise SandboxUnavailableError(
                "network=True needs bubblewrap's network namespace (and slirp4netns): in "
                "landlock mode the sandbox would share this host's loopback services"
            )
        if limits.network and mode == "bwrap":
            slirp4netns()  # refuses now, with what to install, rather than at start
        # as root, each sandbox gets a uid of its own (claimed at start, like its files: an
        # object that never starts holds nothing)
        self._own_uid = os.getuid() == 0 and mode != "unsafe" and uid_drop_possible(mode)
        self._uid_claim: UidClaim | None = None
        self.uid = 0
        if mode == "landlock" and os.getuid() == 0 and not self._own_uid:
            # uid 0 is exempt from RLIMIT_NPROC (a fork bomb would be unbounded) and owns host files:
            # without namespaces, the uid drop is not optional.
            raise SandboxUnavailableError(
                "landlock mode needs to run code as a separate uid, but the Python installation "
                f"({sys.base_prefix}) is not reachable for other users and no system python3 of "
                "the same version is; install bubblewrap, or set VF_SANDBOX_PYTHON to a "
                "world-readable Python of this version (e.g. under /usr or /opt)"
            )
        self.host_dir: Path | None = None  # made by start()
        self.disk = "rlimits"  # "tmpfs" once start() mounted the sandbox's own disk
        self.seccomp = seccomp.backend() if mode != "unsafe" else None
        self.process: asyncio.subprocess.Process | ZygoteProcess | None = None
        self._network: subprocess.Popen | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self.destroyed = False

    # --- lifecycle -----------------------------------------------------------------------------
    def _claim(self) -> None:
        """The sandbox's uid and host directory, taken when it starts."""
        if self._own_uid:
            self._uid_claim = UidClaim()
            self.uid = self._uid_claim.uid
        _remove_stale_dirs_once()
        global _made_dirs
        _made_dirs = True  # before the directory: the exit hook then looks for it
        self.host_dir = owned_dir(HOST_DIR_PREFIX)  # 0700
        self.workdir_host = self.host_dir / "work"
        self.tmp_host = self.host_dir / "tmp"

    def _prepare_disk(self) -> None:
        """One size- and inode-limited disk for the work dir and ``/tmp`` together (as root),
        each directory private to the sandbox's uid: no other local user lists or reads it."""
        host_dir = self.host_dir
        assert host_dir is not None, "_claim() first"
        if self.mode != "unsafe" and mount_disk(
            host_dir, self.limits.disk_mb, self.limits.max_files
        ):
            self.disk = "tmpfs"
        for path in (self.workdir_host, self.tmp_host):
            path.mkdir(mode=0o700)
            if self.uid:
                os.chown(path, self.uid, self.uid)
        if self.uid:
            os.chmod(host_dir, 0o711)  # the sandbox uid passes through; nobody lists it

    def _config(self, packages: list[str]) -> dict[str, Any]:
        python = sandbox_python(self.mode)
        if self.mode == "bwrap":
            snippet_path = python.sys_path + (["/opt/vf/site"] if packages else [])
        else:
            snippet_path = python.sys_path + sorted({os.path.dirname(p) for p in packages})
        config: dict[str, Any] = {
            "uid": self.uid,
            "mode": self.mode,
            "workdir": "/workspace" if self.mode == "bwrap" else str(self.workdir_host),
            "limits": self.limits.model_dump(),
            "max_output_bytes": self.limits.max_output_bytes,
            "sys_path": snippet_path,
            "seccomp": (
                seccomp.program(self.limits.network, host_ipc=self.mode == "landlock").hex()
                if self.mode != "unsafe"
                else ""
            ),
        }
        if self.mode != "landlock":  # bwrap's mounts are the view; listing the stdlib cost
            return config  # each start about 1 ms of this process's CPU, for nothing
        config["read_paths"] = [
            "/usr",
            "/bin",
            "/lib",
            "/lib64",
            "/etc/ld.so.cache",
            "/etc/localtime",
            "/etc/alternatives",
            *without(python.paths, python.hidden),
            *packages,
            *self.limits.read_only_dirs,
        ]
        config["write_paths"] = [
            str(self.workdir_host),
            str(self.tmp_host),
            "/dev/null",
            "/dev/zero",
            "/dev/urandom",
        ]
        return config

    def _bwrap_options(self, packages: list[str]) -> list[str]:
        """bubblewrap's options: private namespaces (the network one always: ``network=True``
        gets it wired by slirp4netns), the host's read-only view, the sandbox's own dirs."""
        python = sandbox_python(self.mode)
        args = [
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-net",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
        ]
        if os.getuid() == 0:  # spent by the worker's uid drop
            args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            args.append("--unshare-user")
        args += system_binds()
        # /tmp first: a project or venv living under /tmp (CI clones do) is bound on top of it.
        args += ["--bind", str(self.tmp_host), "/tmp", "--proc", "/proc", "--dev", "/dev"]
        args += with_parents([(p, p) for p in python.paths], "--ro-bind")
        for hidden in python.hidden:  # the host's installed packages stay out of view
            args += ["--tmpfs", hidden]
        args += with_parents(
            [(p, f"/opt/vf/site/{os.path.basename(p)}") for p in packages], "--ro-bind"
        )
        args += with_parents([(d, d) for d in self.limits.read_only_dirs], "--ro-bind")
        args += ["--bind", str(self.workdir_host), "/workspace"]  # the worker chdirs as its uid
        args.append("--clearenv")
        for name, value in SANDBOX_ENV.items():
            args += ["--setenv", name, value]
        return args

    async def start(self) -> LocalSandbox:
        self._claim()
        env = {
            "PATH": SAFE_PATH,
            "LANG": "C.UTF-8",
            "HOME": str(self.workdir_host),
            "TMPDIR": str(self.tmp_host),
            "PYTHONIOENCODING": "utf-8",
            "PYTHONNOUSERSITE": "1",  # as in bwrap: the work dir's user site runs nowhere
        }
        try:
            self.budget = (
                Budget.create(self.limits) if self.mode != "unsafe" else Budget("none", [])
            )
            self._prepare_disk()
        except BaseException:  # no budget or disk: give back the uid and dir already taken
            self._abandon()
            raise
        packages = package_dirs(self.limits.packages)
        python = sandbox_python(self.mode)
        pass_fds: list[int] = []
        info = None
        # the worker's code comes on stdin, compiled once on the host (``worker_code``): its argv
        # holds no host path, and no sandbox compiles it again
        worker = [python.executable, "-I", "-S", "-c", BOOTSTRAP]
        command = worker
        if self.mode == "bwrap":
            # bwrap is pid 1 inside: its argv (host paths of the binds) must not be readable
            # there, so its options come through a pipe (--args FD)
            options = self._bwrap_options(packages)
            if self.limits.network:
                info, info_write = os.pipe()
                resolv_read, resolv_write = os.pipe()  # names resolve through slirp4netns
                os.write(resolv_write, RESOLV_CONF)
                os.close(resolv_write)
                options += ["--info-fd", str(info_write)]
                options += [
                    "--perms",
                    "0644",
                    "--ro-bind-data",
                    str(resolv_read),
                    "/etc/resolv.conf",
                ]
                pass_fds += [info_write, resolv_read]
            read_end, write_end = os.pipe()
            os.write(write_end, b"".join(a.encode() + b"\0" for a in options))
            os.close(write_end)
            if not self.zygote:
                pass_fds.append(read_end)
            bwrap = shutil.which("bwrap") or "bwrap"
            command = [bwrap, "--args", str(read_end), *worker]
        spawn: asyncio.Future[asyncio.subprocess.Process | ZygoteProcess]
        if self.zygote:  # the same options, applied by a fork of the zygote (which closes them)
            spawn = asyncio.ensure_future(zygote.spawn(read_end))
        else:
            spawn = asyncio.ensure_future(
                asyncio.create_subprocess_exec(
                    *command,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.DEVNULL,
                    start_new_session=True,
                    env=env,
                    limit=1 << 26,
                    pass_fds=pass_fds,
                )
            )
        try:
            self.process = await asyncio.shield(spawn)
        except BaseException as error:  # the spawn failed or was stopped: nothing of it stays
            try:
                if isinstance(error, asyncio.CancelledError):  # the process may exist: kill it
                    self.process = await _settled(spawn)
            finally:  # even when the spawn ended in SIGTERM's SystemExit
                self._abandon()
            raise
        finally:
            for fd in pass_fds:
                os.close(fd)
        _live.add(self)
        joined = None
        if self.budget.groups:  # at once: bubblewrap's children are then born in the budget
            joined = asyncio.ensure_future(
                asyncio.to_thread(self.budget.enter, self.process.pid, complete=False)
            )
            joined.add_done_callback(_retrieved)
        try:
            if info is not None:
                self._network = await asyncio.to_thread(_wire_network, info)
            stdin, stdout = _pipes(self.process)
            # the worker's code and its configuration at once: it sets itself up (uid, filter,
            # warm-up) while this process checks its budget, instead of waiting for it
            code = b"" if self.zygote else worker_code()  # the zygote's worker has its code
            stdin.write(code + json.dumps(self._config(packages)).encode() + b"\n")
            await stdin.drain()
            # Everything the sandbox starts is in its budget: moved in as soon as it is spawned
            # (above: the move can wait for the kernel for milliseconds, while bubblewrap and the
            # interpreter start), and checked again once the interpreter has started: all of its
            # processes are there then, and none forks or runs anything of the model's before
            # its first request, which is sent only after this check.
            line = await asyncio.wait_for(stdout.readline(), 30)
            if line == b"\n":
                if joined is not None:
                    await joined
                    await asyncio.to_thread(self.budget.enter, self.process.pid)
                line = await asyncio.wait_for(stdout.readline(), 30)
        except (OSError, SandboxError, TimeoutError, ConnectionResetError):
            line = b""
        except BaseException:  # cancelled mid-handshake: whoever waited for it is gone
            self._abandon()
            raise
        if not (json.loads(line) if line else {}).get("ready"):
            await self.destroy()
            raise SandboxError(
                f"the sandbox worker did not start (mode {self.mode}, exit {self.process.returncode})"
            )
        return self

    def _abandon(self) -> None:
        """Synchronous destroy, for a start that was cancelled: the process, its budget, its
        disk and its uid go now (nothing will await a destroy for it)."""
        self.destroyed = True
        try:
            self._kill()
            self._remove_files()
        finally:
            _live.discard(self)
            if self._uid_claim is not None:
                self._uid_claim.release()

    async def destroy(self) -> None:
        if self.destroyed:
            return
        self.destroyed = True
        try:
            await self._stop_processes()
        finally:  # the sandbox's disk and files go whatever happened above
            await asyncio.to_thread(self._remove_files)
            if self._uid_claim is not None:  # only once nothing of the sandbox runs as that uid
                self._uid_claim.release()

    def _remove_files(self) -> None:
        """The sandbox's disk and directory. Whether a disk is mounted is read from the
        directory, not from ``self.disk``: a stop (SIGTERM's ``SystemExit``) that lands between
        the mount and that flag being set would otherwise leave a tmpfs mounted in ``/tmp``."""
        if self.host_dir is None:
            return
        if self.disk == "tmpfs" or os.path.ismount(self.host_dir):
            unmount_disk(self.host_dir)
        shutil.rmtree(self.host_dir, True)

    async def _stop_processes(self) -> None:
        process = self.process
        try:
            if process is not None and process.returncode is None:
                try:
                    _pipes(process)[0].close()
                    await asyncio.wait_for(process.wait(), 1.0)
                except (TimeoutError, ConnectionResetError, BrokenPipeError):
                    pass
        finally:  # synchronous, so a destroy cancelled while it waited still kills
            self._kill()
        if process is not None and process.returncode is None:
            await process.wait()
        _live.discard(self)
        budget = getattr(self, "budget", None)
        if budget is not None:  # the worker is reaped now: nothing holds its cgroups
            await asyncio.to_thread(budget.close)

    def _kill(self) -> None:
        """Synchronous and idempotent: also what the exit hook calls."""
        process = self.process
        if isinstance(process, ZygoteProcess):
            process.kill()
        elif process is not None and process.returncode is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.mode == "landlock" and self.uid:
            _kill_uid(self.uid)
        if self._network is not None and self._network.poll() is None:
            self._network.kill()
            self._network.wait()
        budget = getattr(self, "budget", None)
        if budget is not None:
            budget.close()

    # --- requests ------------------------------------------------------------------------------
    async def _request(self, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        if self.destroyed or self.process is None:
            raise SandboxError("the sandbox was destroyed")
        async with self._lock:
            payload["id"] = next(self._ids)
            try:
                stdin, stdout = _pipes(self.process)
                stdin.write(json.dumps(payload).encode() + b"\n")
                await stdin.drain()
                async with asyncio.timeout(timeout):  # a timer, not a task per read (wait_for)
                    line = await stdout.readline()
            except (TimeoutError, BrokenPipeError, ConnectionResetError) as exc:
                await self.destroy()
                raise SandboxError(
                    f"the sandbox stopped answering ({type(exc).__name__}); it was destroyed"
                ) from exc
            if not line:
                code = self.process.returncode
                await self.destroy()
                raise SandboxError(f"the sandbox crashed (worker exit {code})")
        response = json.loads(line)
        if "error" in response:
            raise SandboxError(response["error"])
        return response

    async def _exec(
        self, code: str, language: str, timeout: float | None, repl: bool
    ) -> ExecResult:
        wall = timeout or self.limits.wall_time_s
        response = await self._request(
            {"op": "exec", "code": code, "language": language, "timeout": wall, "repl": repl},
            wall + 10,
        )
        response.pop("id", None)
        return ExecResult(**response)

    async def run_python(self, code: str, timeout: float | None = None) -> ExecResult:
        return await self._exec(code, "python", timeout, False)

    async def run_repl(self, code: str, timeout: float | None = None) -> ExecResult:
        return await self._exec(code, "python", timeout, True)

    async def run_shell(self, command: str, timeout: float | None = None) -> ExecResult:
        return await self._exec(command, "shell", timeout, False)

    async def reset_repl(self) -> None:
        await self._request({"op": "reset_repl"}, 10)

    async def upload(self, path: str, data: bytes) -> None:
        await self._request({"op": "write", "path": path, "data": data.hex()}, 30)

    async def download(self, path: str) -> bytes:
        return bytes.fromhex((await self._request({"op": "read", "path": path}, 30))["data"])


SPAWN_SETTLE_S = 2.0
"""How long a cancelled start waits for its spawn to finish before cancelling it as well."""


async def _settled(spawn: asyncio.Future) -> asyncio.subprocess.Process | ZygoteProcess | None:
    """The process a cancelled start's spawn made, if it made one. When ``asyncio.run`` cancels
    every task (Ctrl-C, SIGTERM) it also cancels the transport's own pipe-connecting task, and
    then CPython's cancelled spawn waits forever for an exit it is never told of (the exit is
    queued behind the pipes that never connected): so the wait is bounded, then the spawn is
    cancelled again, which ends it (it killed its process before it began to wait)."""
    done, _ = await asyncio.wait({spawn}, timeout=SPAWN_SETTLE_S)
    if not done:
        spawn.cancel()
        await asyncio.wait({spawn})
        return None
    if spawn.cancelled() or spawn.exception() is not None:
        return None
    return spawn.result()


def _retrieved(task: asyncio.Future) -> None:
    """A start that failed or was stopped before awaiting ``task`` leaves its outcome unread."""
    if not task.cancelled():
        task.exception()


def _kill_uid(uid: int) -> None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.kill(int(entry), signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                pass


def _remove_stale_dirs(this_process: bool = False) -> None:
    """Directories (and disks) of sandboxes whose process died without cleaning up (SIGKILL),
    or at exit (``this_process``) only this process's own: only this user's (``abandoned``),
    and each unmounted through a descriptor held on the directory that was judged (as root, a
    name another user swapped for a link in ``/tmp`` would otherwise have a mount it points at
    unmounted)."""
    temp = Path(tempfile.gettempdir())
    for entry in abandoned(temp, HOST_DIR_PREFIX, this_process=this_process):
        with pinned(entry) as fd:
            if fd is None:
                continue
            for mount in _mounts_of(fd, temp):
                unmount_disk(mount)
        shutil.rmtree(entry, ignore_errors=True)


def _mounts_of(fd: int, parent: Path) -> list[Path]:
    """A sandbox directory's disks (``work`` and ``tmp``, or the directory itself in older
    layouts), as paths through its descriptor: a mount point has a device of its own."""
    held = Path(f"/proc/self/fd/{fd}")
    device = os.fstat(fd).st_dev
    mounts = []
    for name in ("work", "tmp"):
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_dev != device:
            mounts.append(held / name)
    with contextlib.suppress(OSError):
        if device != parent.stat().st_dev:
            mounts.append(held)
    return mounts


_remove_stale_dirs_once = cache(_remove_stale_dirs)  # before this process's first sandbox


def _wire_network(info: int) -> subprocess.Popen:
    """Read bwrap's --info-fd (the sandbox's host pid) and give its namespace a network."""
    with os.fdopen(info, "rb") as stream:
        raw = b""
        while b"}" not in raw:
            chunk = stream.read1(4096)
            if not chunk:
                raise SandboxError("bubblewrap said nothing about the sandbox it started")
            raw += chunk
    return connect(int(json.loads(raw[: raw.index(b"}") + 1])["child-pid"]))


@atexit.register
def _kill_all_sandboxes() -> None:
    for sandbox in list(_live):
        sandbox._kill()
        sandbox._remove_files()
    # and every directory this process made whose sandbox was not (or no longer) in ``_live``:
    # a SIGINT's SystemExit may land between a start's ``_claim`` and its spawn, or between a
    # destroy's ``_live.discard`` and its file removal
    if _made_dirs:
        _remove_stale_dirs(this_process=True)


def _pipes(
    process: asyncio.subprocess.Process | ZygoteProcess,
) -> tuple[asyncio.StreamWriter, asyncio.StreamReader]:
    """The worker's stdin and stdout (it is always started with both piped)."""
    assert process.stdin is not None and process.stdout is not None
    return process.stdin, process.stdout
