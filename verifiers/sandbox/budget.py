"""Per-sandbox budgets: memory, processes and CPU for the sandbox as a whole, not per process.

rlimits bound each process (six children of 400 MiB each pass a 512 MiB RLIMIT_AS); a cgroup bounds
everything the sandbox starts together. cgroup v2 is used where its memory and pids controllers
are delegated, else the v1 hierarchies; without either (not root, no cgroup filesystem) the
sandbox keeps the per-process rlimits only, and ``kind`` says which one holds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from functools import cache
from pathlib import Path

from verifiers.sandbox.base import SandboxLimits

CGROUP_ROOT = Path("/sys/fs/cgroup")
CPU_PERIOD_US = 100_000


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _v2_root() -> Path | None:
    for root in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
        controllers = root / "cgroup.controllers"
        try:
            available = set(controllers.read_text().split())
        except OSError:
            continue
        if {"memory", "pids"} <= available and os.access(root, os.W_OK):
            return root
    return None


class Budget:
    """One sandbox's cgroup(s). ``enter(pid)`` once its processes have started, before any of
    them runs the model's code; ``close()`` kills whatever is left in them and removes them."""

    def __init__(self, kind: str, groups: list[Path]) -> None:
        self.kind, self.groups = kind, groups

    @classmethod
    def create(cls, limits: SandboxLimits) -> Budget:
        _remove_stale()  # once per process
        _retry_left_behind()
        name = f"vf-sandbox-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        memory = limits.memory_mb * 1024 * 1024
        try:
            root = _v2_root()
            if root is not None:
                with contextlib.suppress(OSError):  # enable the controllers for children
                    _write(root / "cgroup.subtree_control", "+memory +pids +cpu")
                group = root / name
                group.mkdir()
                _write(group / "memory.max", str(memory))
                with contextlib.suppress(OSError):
                    _write(group / "memory.swap.max", "0")
                _write(group / "pids.max", str(limits.max_processes))
                with contextlib.suppress(OSError):
                    _write(group / "cpu.max", f"{CPU_PERIOD_US} {CPU_PERIOD_US}")
                return cls("cgroup2", [group])
            return cls._v1(name, limits, memory)
        except OSError:
            return cls("rlimits", [])

    @classmethod
    def _v1(cls, name: str, limits: SandboxLimits, memory: int) -> Budget:
        memory_root, pids_root = CGROUP_ROOT / "memory", CGROUP_ROOT / "pids"
        if not (os.access(memory_root, os.W_OK) and os.access(pids_root, os.W_OK)):
            return cls("rlimits", [])
        groups = []
        try:
            group = memory_root / name
            group.mkdir()
            groups.append(group)
            _write(group / "memory.limit_in_bytes", str(memory))
            with contextlib.suppress(OSError):  # swap counts too where the kernel accounts it
                _write(group / "memory.memsw.limit_in_bytes", str(memory))
            group = pids_root / name
            group.mkdir()
            groups.append(group)
            _write(group / "pids.max", str(limits.max_processes))
            cpu_root = CGROUP_ROOT / "cpu"
            if os.access(cpu_root, os.W_OK):
                group = cpu_root / name
                group.mkdir()
                groups.append(group)
                _write(group / "cpu.cfs_period_us", str(CPU_PERIOD_US))
                _write(group / "cpu.cfs_quota_us", str(CPU_PERIOD_US))  # one core at most
        except OSError:
            cls("cgroup1", groups).close()
            return cls("rlimits", [])
        return cls("cgroup1", groups)

    def enter(self, root: int, *, complete: bool = True) -> None:
        """Move ``root`` and every process below it that is not in the budget yet into it; with
        ``complete`` (the tree cannot grow any more), also check that all of them are in. The
        sandbox calls this as soon as it has spawned ``root`` (what it starts from then on is
        born inside; a child started during the move is not) and again, ``complete``, once its
        interpreter says it has started, before it sends the worker its first request: until
        then none of its processes forks or runs anything of the model's (the worker forks
        only for a request). Not a
        shell that joins and then execs the sandbox: the first move into a cgroup v1 hierarchy
        waits for an RCU grace period (8-16 ms on a small VM), which then delayed every cold
        start; now it passes while bubblewrap and the interpreter start. A process already in
        is not written again (every move takes the kernel's lock, and may wait again)."""
        if not self.groups:
            return
        for group in self.groups:
            inside = _members(group)
            for pid in _tree(root):
                if pid not in inside:
                    _write(group / "cgroup.procs", str(pid))
        for group in self.groups if complete else []:  # a refusal, never a process outside
            if not set(_tree(root)) <= _members(group):
                raise OSError(f"a process of the sandbox is outside its budget {group}")

    def pids(self) -> set[int]:
        found: set[int] = set()
        for group in self.groups:
            with contextlib.suppress(OSError):
                found |= _members(group)
        return found

    def close(self) -> None:
        """Kill every process still in the budget (fork-hoppers included), then remove it
        (a group is kept, and retried by the next ``close``, while a process is still dying)."""
        for _ in range(100):
            pids = self.pids()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        self.groups = _remove_groups(self.groups)
        if self.groups:  # a process still dying holds it: the next budget's start retries
            _LEFT_BEHIND.append(self)


def _members(group: Path) -> set[int]:
    return {int(p) for p in (group / "cgroup.procs").read_text().split()}


def _tree(root: int) -> list[int]:
    """``root`` and its descendants (``/proc/PID/task/TID/children``, else every ``ppid``)."""
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        try:
            kids = [
                int(child)
                for tid in os.listdir(f"/proc/{pid}/task")
                for child in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
            ]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}"):
                raise OSError(f"sandbox process {pid} is gone") from None
            kids = _children_by_scan(pid)
        stack += kids
    return found


def _children_by_scan(parent: int) -> list[int]:
    """Where the kernel has no ``children`` files: every process whose parent is ``parent``."""
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == parent:
                    kids.append(int(entry))
    return kids


_LEFT_BEHIND: list[Budget] = []  # budgets closed while a process was still leaving them


def _remove_groups(groups: list[Path]) -> list[Path]:
    """Remove each group; the ones a dying process still holds are returned."""
    left = []
    for group in groups:
        try:
            group.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            left.append(group)
    return left


def _retry_left_behind() -> None:
    for budget in list(_LEFT_BEHIND):
        budget.groups = _remove_groups(budget.groups)
        if not budget.groups:
            _LEFT_BEHIND.remove(budget)


def available_kind() -> str:
    """Which budget a new sandbox on this machine gets: cgroup2, cgroup1 or rlimits for memory,
    processes and CPU, plus "+tmpfs" where its disk is a size-limited tmpfs (as root)."""
    if _v2_root() is not None:
        kind = "cgroup2"
    elif os.access(CGROUP_ROOT / "memory", os.W_OK) and os.access(CGROUP_ROOT / "pids", os.W_OK):
        kind = "cgroup1"
    else:
        kind = "rlimits"
    return kind + ("+tmpfs" if os.getuid() == 0 else "")


@cache
def _remove_stale() -> None:
    """Empty budgets left by processes that died without closing them."""
    for hierarchy in ("", "unified", "memory", "pids", "cpu"):
        root = CGROUP_ROOT / hierarchy
        try:
            entries = [e for e in root.iterdir() if e.name.startswith("vf-sandbox-")]
        except OSError:
            continue
        for entry in entries:
            owner = entry.name.split("-")[2]
            if (
                owner.isdigit()
                and int(owner) != os.getpid()
                and not Path(f"/proc/{owner}").exists()
            ):
                with contextlib.suppress(OSError):
                    entry.rmdir()


_libc = None


def _mount_libc():
    global _libc
    if _libc is None:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def mount_disk(path: Path, size_mb: int, max_files: int) -> bool:
    """Mount a tmpfs of ``size_mb`` MiB and ``max_files`` inodes on ``path`` (root only; its
    root stays root's, 0700, until the caller makes the sandbox's directories in it).

    The sandbox's writes then fill its own small filesystem, never the host disk, and every
    directory of the sandbox shares that one budget; False when this process cannot mount (the
    per-file rlimit is all that holds then)."""
    if os.getuid() != 0:
        return False
    libc = _mount_libc()
    options = f"size={size_mb}m,nr_inodes={max_files},mode=0700,uid=0,gid=0".encode()
    flags = 0x2 | 0x4  # MS_NOSUID | MS_NODEV (exec stays: snippets may run their own scripts)
    return libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", flags, options) == 0


def unmount_disk(path: Path) -> None:
    _mount_libc().umount2(str(path).encode(), 2)  # MNT_DETACH
