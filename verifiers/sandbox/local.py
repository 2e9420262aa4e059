"""Local sandboxes on Linux: bubblewrap namespaces by default, Landlock as the fallback.

Isolation, in layers:
- ``bwrap``: private pid/net/mount/ipc/uts namespaces; read-only ``/usr`` and interpreter; a private
  work dir and ``/tmp``; ``--die-with-parent``, ``--new-session``; all capabilities dropped except
  setuid/setgid, which the worker spends at once to become a distinct unprivileged uid (when the
  host runs as root) before any user code.
- ``landlock`` (no namespaces available): the same worker, with Landlock filesystem rules, the uid
  drop and a child subreaper instead of the namespaces. The sandbox uid must be able to reach the
  interpreter: when this one lives somewhere private (pyenv under /root), a system Python of the
  same version (or ``VF_SANDBOX_PYTHON``) runs the worker instead.
- always: per-snippet rlimits (CPU, memory, processes, file size, open files), a seccomp filter
  (no ``socket(2)`` at all, so no network and no host IPC; ``network=True`` allows IPv4/IPv6 only;
  no ptrace/mount/unshare/bpf/...), a wall-clock kill, and a sweep of leftover processes after
  each snippet.
- ``unsafe``: no isolation, for trusted code only; never chosen automatically.

The mode is probed once per process (a few milliseconds) and logged; environments record it in
results metadata.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import itertools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import weakref
from functools import cache
from pathlib import Path
from typing import Any

from verifiers.sandbox.base import (
    ExecResult,
    IsolationMode,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxProvider,
)
from verifiers.sandbox.budget import Budget, mount_disk, unmount_disk

logger = logging.getLogger("verifiers.sandbox")

WORKER = Path(__file__).with_name("worker.py")
UID_BASE, UID_COUNT = 100_000, 60_000
UID_LOCK_DIR = Path(os.environ.get("VF_SANDBOX_UID_DIR", "/run/verifiers-sandbox-uids"))


class UidClaim:
    """A sandbox uid no other sandbox on this machine holds: an exclusive lock on a per-uid
    file, kept while the sandbox lives and released by the kernel if the process dies, so two
    processes (or a crashed one) can never hand out the same uid."""

    def __init__(self) -> None:
        import fcntl
        import random

        UID_LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        start = random.randrange(UID_COUNT)
        for offset in range(UID_COUNT):
            uid = UID_BASE + (start + offset) % UID_COUNT
            fd = os.open(UID_LOCK_DIR / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.uid, self._fd = uid, fd
            return
        raise SandboxUnavailableError(f"all {UID_COUNT} sandbox uids are in use")

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


_live: weakref.WeakSet[LocalSandbox] = weakref.WeakSet()


class SandboxUnavailableError(SandboxError):
    pass


@cache
def probe_mode() -> IsolationMode:
    """The strongest isolation this machine offers (cached per process)."""
    bwrap = shutil.which("bwrap")
    if bwrap:
        args = [bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--die-with-parent"]
        if os.getuid() != 0:
            args.append("--unshare-user")
        try:
            if subprocess.run([*args, "true"], capture_output=True, timeout=10).returncode == 0:
                return "bwrap"
        except (OSError, subprocess.TimeoutExpired):
            pass
    if landlock_abi() >= 1 and (os.getuid() != 0 or _uid_drop_possible("landlock")):
        return "landlock"
    raise SandboxUnavailableError(
        "no sandbox isolation is available: install bubblewrap (Debian: apt-get install bubblewrap) or use a "
        "kernel with Landlock enabled; for trusted code only, pass mode='unsafe'"
    )


def landlock_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(int(libc.syscall(444, None, 0, 1)), 0)  # LANDLOCK_CREATE_RULESET_VERSION


def _uid_drop_possible(mode: str) -> bool:
    """In bwrap mode the mount namespace makes parents traversable; without it (landlock), the
    interpreter must be reachable for another uid (see ``sandbox_python``)."""
    if mode == "bwrap":
        return True
    return _reachable(sandbox_python("landlock").paths)


def _reachable(paths: list[str]) -> bool:
    """Other users can reach each path: every directory on the way is searchable, and the path
    itself is readable (a file) or searchable (a directory)."""
    for path in paths:
        current = Path(path)
        try:
            mode = current.stat().st_mode
        except OSError:
            return False
        if not mode & (0o001 if current.is_dir() else 0o004):
            return False
        for part in current.parents:
            try:
                if not part.stat().st_mode & 0o001:
                    return False
            except OSError:
                return False
    return True


class SandboxPython:
    """The interpreter the in-sandbox worker runs with, and exactly what of it the sandbox sees:
    the executable, its shared library, its standard library (without the site-packages inside
    it), and the snippet's ``sys.path``. Nothing of a virtualenv, the project or ``$HOME``."""

    def __init__(
        self, executable: str, paths: list[str], hidden: list[str], sys_path: list[str]
    ) -> None:
        self.executable, self.paths, self.hidden, self.sys_path = (
            executable,
            paths,
            hidden,
            sys_path,
        )


_DESCRIBE = """
import json, os, sys, sysconfig
stdlib = sysconfig.get_paths()["stdlib"]
libdir, shared = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("Py_ENABLE_SHARED")
libs = []
if shared and libdir and os.path.isdir(libdir):
    libs = [os.path.join(libdir, f) for f in os.listdir(libdir) if f.startswith("libpython")]
print(json.dumps([sys.version_info[:2], os.path.realpath(sys.executable), stdlib, sys.path, libs]))
"""


@cache
def sandbox_python(mode: str) -> SandboxPython:
    """This interpreter (its real binary, never a virtualenv's), except in landlock mode as root
    when it lives somewhere other users cannot reach (e.g. pyenv under /root, 0700): then
    ``VF_SANDBOX_PYTHON`` or a system ``python3`` of the same version that they can."""
    override = os.environ.get("VF_SANDBOX_PYTHON")
    current = _describe(override or os.path.realpath(sys.executable))
    if current is None:
        raise SandboxUnavailableError(
            f"the sandbox interpreter {override or sys.executable} did not start"
        )
    if override or mode != "landlock" or os.getuid() != 0 or _reachable(current.paths):
        return current
    for candidate in (
        f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}",
        "/usr/bin/python3",
    ):
        other = _describe(candidate) if os.path.exists(candidate) else None
        if other is not None and _reachable(other.paths):
            logger.info(
                "landlock sandboxes run %s (%s is not reachable for other uids)",
                candidate,
                sys.executable,
            )
            return other
    return current


def _describe(executable: str) -> SandboxPython | None:
    """Ask an interpreter (isolated: -I -S) where its parts live; None unless it is this
    Python's major.minor version."""
    try:
        out = subprocess.run(
            [executable, "-I", "-S", "-c", _DESCRIBE], capture_output=True, text=True, timeout=30
        )
        version, real, stdlib, path, libs = json.loads(out.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        logger.warning("sandbox interpreter %s did not start", executable)
        return None
    if tuple(version) != tuple(sys.version_info[:2]):
        logger.warning(
            "sandbox interpreter %s is Python %s, not %s.%s: not used",
            executable,
            ".".join(map(str, version)),
            *sys.version_info[:2],
        )
        return None
    sys_path = [p for p in path if p and os.path.exists(p)]
    hidden = [
        os.path.join(stdlib, d)
        for d in ("site-packages", "dist-packages")
        if os.path.isdir(os.path.join(stdlib, d))
    ]
    paths = _outermost({real, *sys_path, *libs})
    return SandboxPython(real, paths, hidden, sys_path)


def _without(paths: list[str], hidden: list[str]) -> list[str]:
    """``paths``, with each directory that holds a hidden one replaced by its other entries
    (Landlock grants whole trees, so the hidden directory must not be under any grant)."""
    out = []
    for path in paths:
        inside = [h for h in hidden if os.path.dirname(h) == path]
        if not inside or not os.path.isdir(path):
            out.append(path)
            continue
        out += [
            os.path.join(path, e) for e in os.listdir(path) if os.path.join(path, e) not in inside
        ]
    return out


def package_dirs(names: list[str]) -> list[str]:
    """Host directories (or single-file modules) of the packages a sandbox may import."""
    import importlib.util

    found = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None:
            raise SandboxUnavailableError(f"sandbox package {name!r} is not installed")
        if spec.submodule_search_locations:
            found.extend(str(Path(p).resolve()) for p in spec.submodule_search_locations)
        elif spec.origin:
            found.append(str(Path(spec.origin).resolve()))
    return found


def _outermost(paths: set[str]) -> list[str]:
    """Keep only the outermost of nested paths."""
    ordered = sorted(paths, key=len)
    kept: list[str] = []
    for path in ordered:
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


@cache
def _public_worker() -> Path:
    """The worker script where a sandbox uid can read it (the checkout may be private, e.g. a
    0700 temporary directory); removed at exit."""
    directory = Path(tempfile.mkdtemp(prefix="vf-worker-"))
    os.chmod(directory, 0o755)
    target = directory / "worker.py"
    shutil.copyfile(WORKER, target)
    os.chmod(target, 0o644)
    atexit.register(shutil.rmtree, directory, True)
    return target


def _system_binds() -> list[str]:
    args: list[str] = []
    for path in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64"):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in (
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/alternatives",
        "/etc/localtime",
    ):
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args


def _with_parents(binds: list[tuple[str, str]], flag: str) -> list[str]:
    """Bind arguments preceded by world-traversable parent dirs (bwrap makes them 0700 otherwise)."""
    args: list[str] = []
    made: set[str] = {"/", "/usr", "/tmp", "/workspace", "/proc", "/dev"}
    for source, dest in binds:
        parents = []
        parent = os.path.dirname(dest)
        while parent not in made and parent != "/":
            parents.append(parent)
            parent = os.path.dirname(parent)
        for p in reversed(parents):
            args += ["--perms", "0755", "--dir", p]
            made.add(p)
        args += [flag, source, dest]
        made.add(dest)
    return args


class LocalSandbox(Sandbox):
    def __init__(self, mode: IsolationMode, limits: SandboxLimits) -> None:
        self.mode = mode
        self.limits = limits
        self._uid_claim = (
            UidClaim()
            if os.getuid() == 0 and mode != "unsafe" and _uid_drop_possible(mode)
            else None
        )
        self.uid = self._uid_claim.uid if self._uid_claim is not None else 0
        if mode == "landlock" and os.getuid() == 0 and not self.uid:
            # uid 0 is exempt from RLIMIT_NPROC (a fork bomb would be unbounded) and owns host files:
            # without namespaces, the uid drop is not optional.
            raise SandboxUnavailableError(
                "landlock mode needs to run code as a separate uid, but the Python installation "
                f"({sys.base_prefix}) is not reachable for other users and no system python3 of "
                "the same version is; install bubblewrap, or set VF_SANDBOX_PYTHON to a "
                "world-readable Python of this version (e.g. under /usr or /opt)"
            )
        _remove_stale_dirs()
        self.host_dir = Path(tempfile.mkdtemp(prefix=f"vf-sandbox-{os.getpid()}-"))
        self.workdir_host = self.host_dir / "work"
        self.tmp_host = self.host_dir / "tmp"
        self.workdir_host.mkdir()
        self.tmp_host.mkdir()
        self.disk = "rlimits"  # becomes "tmpfs" when start() can mount the sandbox's own disk
        if self.uid:
            for path in (self.workdir_host, self.tmp_host):
                os.chown(path, self.uid, self.uid)
            os.chmod(self.host_dir, 0o711)
        self.process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self.destroyed = False

    # --- lifecycle -----------------------------------------------------------------------------
    def _command(self) -> list[str]:
        inside_workdir = "/workspace" if self.mode == "bwrap" else str(self.workdir_host)
        python = sandbox_python(self.mode)
        python_paths = python.paths
        packages = package_dirs(self.limits.packages)
        if self.mode == "bwrap":
            snippet_path = python.sys_path + (["/opt/vf/site"] if packages else [])
        else:
            snippet_path = python.sys_path + sorted({os.path.dirname(p) for p in packages})
        # In bwrap mode the worker's code is its argv (nothing of the host path leaks through a
        # bind mount); its configuration, with host paths, arrives on stdin, never in argv.
        worker_path = str(_public_worker() if self.uid else WORKER)
        config = {
            "uid": self.uid,
            "mode": self.mode,
            "workdir": inside_workdir,
            "limits": self.limits.model_dump(),
            "max_output_bytes": self.limits.max_output_bytes,
            "sys_path": snippet_path,
            "read_paths": [
                "/usr",
                "/bin",
                "/lib",
                "/lib64",
                "/etc/ld.so.cache",
                "/etc/localtime",
                "/etc/alternatives",
                *_without(python_paths, python.hidden),
                *packages,
                *([str(Path(worker_path).parent)] if self.mode != "bwrap" else []),
            ],
            "write_paths": [
                str(self.workdir_host),
                str(self.tmp_host),
                "/dev/null",
                "/dev/zero",
                "/dev/urandom",
            ],
        }
        self._config = json.dumps(config)
        if self.mode != "bwrap":
            return [python.executable, "-I", "-S", worker_path]
        worker = [python.executable, "-I", "-S", "-c", WORKER.read_text()]
        self._worker = worker
        args = [
            shutil.which("bwrap") or "bwrap",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
        ]
        if not self.limits.network:
            args.append("--unshare-net")
        if os.getuid() == 0:
            args += [
                "--cap-add",
                "CAP_SETUID",
                "--cap-add",
                "CAP_SETGID",
            ]  # spent by the worker's uid drop
        else:
            args.append("--unshare-user")
        args += _system_binds()
        # /tmp first: a project or venv living under /tmp (CI clones do) is bound on top of it.
        args += ["--bind", str(self.tmp_host), "/tmp", "--proc", "/proc", "--dev", "/dev"]
        args += _with_parents([(p, p) for p in python_paths], "--ro-bind")
        for hidden in python.hidden:  # the host's installed packages stay out of view
            args += ["--tmpfs", hidden]
        args += _with_parents(
            [(p, f"/opt/vf/site/{os.path.basename(p)}") for p in packages], "--ro-bind"
        )
        args += [
            "--bind",
            str(self.workdir_host),
            "/workspace",
            "--chdir",
            "/workspace",
            "--clearenv",
            "--setenv",
            "HOME",
            "/workspace",
            "--setenv",
            "PATH",
            "/usr/local/bin:/usr/bin:/bin",
            "--setenv",
            "LANG",
            "C.UTF-8",
            "--setenv",
            "PYTHONIOENCODING",
            "utf-8",
            "--setenv",
            "TMPDIR",
            "/tmp",
        ]
        return args + worker

    async def start(self) -> LocalSandbox:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(self.workdir_host),
            "TMPDIR": str(self.tmp_host),
            "PYTHONIOENCODING": "utf-8",
        }
        self.budget = Budget.create(self.limits) if self.mode != "unsafe" else Budget("none", [])
        if self.mode != "unsafe" and all(
            mount_disk(d, self.limits.disk_mb, self.limits.max_files, self.uid)
            for d in (self.workdir_host, self.tmp_host)
        ):
            self.disk = "tmpfs"
        command, pass_fds = self._command(), ()
        if self.mode == "bwrap":
            # bwrap is pid 1 inside: its argv (host paths of the binds) must not be readable
            # there, so its arguments come through a pipe (--args FD)
            options, worker = command[1 : -len(self._worker)], self._worker
            read_end, write_end = os.pipe()
            os.write(write_end, b"".join(a.encode() + b"\0" for a in options))
            os.close(write_end)
            command, pass_fds = [command[0], "--args", str(read_end), *worker], (read_end,)
        try:
            self.process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
                env=env,
                limit=1 << 26,
                pass_fds=pass_fds,
                # joins the budget between fork and exec: everything the sandbox starts is in it
                preexec_fn=self.budget.enter if self.budget.groups else None,
            )
        finally:
            for fd in pass_fds:
                os.close(fd)
        _live.add(self)
        self.process.stdin.write(self._config.encode() + b"\n")
        await self.process.stdin.drain()
        line = await asyncio.wait_for(self.process.stdout.readline(), 30)
        ready = json.loads(line) if line else {}
        self.seccomp = ready.get("seccomp")
        if not ready.get("ready"):
            await self.destroy()
            raise SandboxError(
                f"the sandbox worker did not start (mode {self.mode}, exit {self.process.returncode})"
            )
        return self

    async def destroy(self) -> None:
        if self.destroyed:
            return
        self.destroyed = True
        try:
            await self._stop_processes()
        finally:  # the sandbox's disk and files go whatever happened above
            if self.disk == "tmpfs":
                for directory in (self.workdir_host, self.tmp_host):
                    unmount_disk(directory)
            await asyncio.to_thread(shutil.rmtree, self.host_dir, True)
            if self._uid_claim is not None:  # only once nothing of the sandbox runs as that uid
                self._uid_claim.release()

    async def _stop_processes(self) -> None:
        process = self.process
        if process is not None and process.returncode is None:
            try:
                process.stdin.close()
                await asyncio.wait_for(process.wait(), 1.0)
            except (TimeoutError, ConnectionResetError, BrokenPipeError):
                pass
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
        if process is not None and process.returncode is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.mode == "landlock" and self.uid:
            _kill_uid(self.uid)
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
                self.process.stdin.write(json.dumps(payload).encode() + b"\n")
                await self.process.stdin.drain()
                line = await asyncio.wait_for(self.process.stdout.readline(), timeout)
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

    async def run_python(
        self, code: str, timeout: float | None = None, repl: bool = False
    ) -> ExecResult:
        return await self._exec(code, "python", timeout, repl)

    async def run_shell(self, command: str, timeout: float | None = None) -> ExecResult:
        return await self._exec(command, "shell", timeout, False)

    async def reset_repl(self) -> None:
        await self._request({"op": "reset_repl"}, 10)

    async def upload(self, path: str, data: bytes) -> None:
        await self._request({"op": "write", "path": path, "data": data.hex()}, 30)

    async def download(self, path: str) -> bytes:
        return bytes.fromhex((await self._request({"op": "read", "path": path}, 30))["data"])


def _kill_uid(uid: int) -> None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.kill(int(entry), signal.SIGKILL)
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                pass


def _remove_stale_dirs() -> None:
    """Directories (and disks) of sandboxes whose process died without cleaning up (SIGKILL)."""
    for entry in Path(tempfile.gettempdir()).glob("vf-sandbox-*-*"):
        owner = entry.name.split("-")[2]
        if not owner.isdigit() or int(owner) == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        for directory in (entry / "work", entry / "tmp"):
            if os.path.ismount(directory):
                unmount_disk(directory)
        shutil.rmtree(entry, ignore_errors=True)


@atexit.register
def _kill_all_sandboxes() -> None:
    for sandbox in list(_live):
        sandbox._kill()
        if sandbox.disk == "tmpfs":
            for directory in (sandbox.workdir_host, sandbox.tmp_host):
                unmount_disk(directory)
        shutil.rmtree(sandbox.host_dir, ignore_errors=True)


class LocalSandboxProvider(SandboxProvider):
    """Pooled local sandboxes. ``mode="auto"`` picks bwrap, else landlock, else refuses."""

    def __init__(
        self, mode: str = "auto", limits: SandboxLimits | None = None, pool_size: int = 2
    ) -> None:
        if mode == "auto":
            self.mode = probe_mode()
        elif mode in ("bwrap", "landlock", "unsafe"):
            self.mode = mode  # type: ignore[assignment]
        else:
            raise ValueError(f"sandbox mode must be auto, bwrap, landlock or unsafe, got {mode!r}")
        if self.mode == "unsafe":
            logger.warning(
                "sandbox mode 'unsafe': code runs WITHOUT isolation; use only for trusted code"
            )
        else:
            logger.info("sandbox isolation: %s", self.mode)
        self.limits = limits or SandboxLimits()
        self.pool_size = pool_size
        self._pool: list[LocalSandbox] = []
        self._filling: set[asyncio.Task] = set()
        self._sandboxes: weakref.WeakSet[LocalSandbox] = weakref.WeakSet()

    async def _start(self, limits: SandboxLimits) -> LocalSandbox:
        sandbox = LocalSandbox(self.mode, limits)
        self._sandboxes.add(sandbox)
        return await sandbox.start()

    def _refill(self) -> None:
        missing = self.pool_size - len(self._pool) - len(self._filling)
        for _ in range(max(missing, 0)):
            task = asyncio.ensure_future(self._start(self.limits))
            self._filling.add(task)
            task.add_done_callback(self._pooled)

    def _pooled(self, task: asyncio.Task) -> None:
        self._filling.discard(task)
        if not task.cancelled() and task.exception() is None:
            self._pool.append(task.result())

    async def warm(self) -> None:
        """Start the pool now (otherwise it fills after the first create)."""
        self._refill()
        if self._filling:
            await asyncio.gather(*self._filling, return_exceptions=True)

    async def create(self, limits: SandboxLimits | None = None) -> LocalSandbox:
        limits = limits or self.limits
        sandbox = None
        if limits == self.limits:
            while self._pool and sandbox is None:
                candidate = self._pool.pop()
                if candidate.process is not None and candidate.process.returncode is None:
                    sandbox = candidate
                else:
                    await candidate.destroy()
            if self.pool_size:
                self._refill()
        return sandbox or await self._start(limits)

    async def close(self) -> None:
        for task in list(self._filling):
            task.cancel()
        await asyncio.gather(*self._filling, return_exceptions=True)
        await asyncio.gather(*(s.destroy() for s in list(self._sandboxes)), return_exceptions=True)
        self._pool.clear()
