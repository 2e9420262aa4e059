"""The process that runs inside a sandbox. Self-contained: it imports nothing from verifiers.

Started once per sandbox (pre-warmed), it drops to the sandbox's uid, then serves requests over
stdin/stdout (one JSON object per line). Each snippet runs in a forked child with rlimits and a
seccomp filter (plus Landlock in the fallback mode); a persistent REPL child keeps Python state
between snippets for PythonEnv. After every snippet, leftover processes of the sandbox are killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import resource
import select
import signal
import struct
import sys
import time
import traceback

# --- seccomp ---------------------------------------------------------------------------------------

_DENY = {  # syscalls no snippet needs: escapes, kernel/namespace control, cross-process access
    "x86_64": dict(
        ptrace=101,
        mount=165,
        umount2=166,
        pivot_root=155,
        chroot=161,
        unshare=272,
        setns=308,
        bpf=321,
        kexec_load=246,
        kexec_file_load=320,
        init_module=175,
        finit_module=313,
        delete_module=176,
        reboot=169,
        swapon=167,
        swapoff=168,
        perf_event_open=298,
        keyctl=250,
        add_key=248,
        request_key=249,
        userfaultfd=323,
        process_vm_readv=310,
        process_vm_writev=311,
        io_uring_setup=425,
        io_uring_enter=426,
        io_uring_register=427,
        open_by_handle_at=304,
        name_to_handle_at=303,
        acct=163,
        settimeofday=164,
        clock_settime=227,
        adjtimex=159,
        syslog=103,
        quotactl=179,
        open_tree=428,
        move_mount=429,
        fsopen=430,
        fsconfig=431,
        fsmount=432,
        fspick=433,
        mount_setattr=442,
        ioperm=173,
        iopl=172,
        vhangup=153,
    ),
    "aarch64": dict(
        ptrace=117,
        mount=40,
        umount2=39,
        pivot_root=41,
        chroot=51,
        unshare=97,
        setns=268,
        bpf=280,
        kexec_load=104,
        kexec_file_load=294,
        init_module=105,
        finit_module=273,
        delete_module=106,
        reboot=142,
        swapon=224,
        swapoff=225,
        perf_event_open=241,
        keyctl=219,
        add_key=217,
        request_key=218,
        userfaultfd=282,
        process_vm_readv=270,
        process_vm_writev=271,
        io_uring_setup=425,
        io_uring_enter=426,
        io_uring_register=427,
        open_by_handle_at=265,
        name_to_handle_at=264,
        acct=89,
        settimeofday=170,
        clock_settime=112,
        adjtimex=171,
        syslog=116,
        quotactl=60,
        open_tree=428,
        move_mount=429,
        fsopen=430,
        fsconfig=431,
        fsmount=432,
        fspick=433,
        mount_setattr=442,
    ),
}
_ARCH = {
    "x86_64": (0xC000003E, 41, 56, 435),
    "aarch64": (0xC00000B7, 198, 220, 435),
}  # audit arch, socket, clone, clone3
_LD, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_ALLOW, _KILL = 0x7FFF0000, 0x80000000
_EPERM, _EACCES, _ENOSYS = 1, 13, 38


def _errno(n: int) -> int:
    return 0x00050000 | n


AF_INET, AF_INET6 = 2, 10


def seccomp_program(machine: str, network: bool = False) -> list[tuple[int, int, int, int]]:
    arch, sys_socket, sys_clone, sys_clone3 = _ARCH[machine]
    prog = [(_LD, 0, 0, 4), (_JEQ, 1, 0, arch), (_RET, 0, 0, _KILL), (_LD, 0, 0, 0)]
    if machine == "x86_64":
        prog += [(_JGE, 0, 1, 0x40000000), (_RET, 0, 0, _errno(_EPERM))]  # the x32 ABI
    for nr in _DENY[machine].values():
        prog += [(_JEQ, 0, 1, nr), (_RET, 0, 0, _errno(_EPERM))]
    # clone3 hides its flags behind a pointer: ENOSYS makes libc fall back to clone, which we can inspect
    prog += [(_JEQ, 0, 1, sys_clone3), (_RET, 0, 0, _errno(_ENOSYS))]
    clone_ns = (
        0x10000000 | 0x00020000 | 0x20000000 | 0x40000000 | 0x04000000 | 0x08000000 | 0x02000000
    )
    prog += [
        (_JEQ, 0, 3, sys_clone),
        (_LD, 0, 0, 16),
        (_JSET, 0, 1, clone_ns),
        (_RET, 0, 0, _errno(_EPERM)),
    ]
    prog += [(_LD, 0, 0, 0)]
    # socket(2): no unix sockets ever (host IPC: tmux, docker, dbus, ssh-agent, pathname or
    # abstract), no netlink or raw sockets; with network=True, TCP/UDP over IPv4/IPv6 only.
    # socketpair(2) stays allowed (asyncio's self-pipe needs it; it reaches nothing outside).
    if network:
        prog += [
            (_JEQ, 0, 5, sys_socket),
            (_LD, 0, 0, 16),
            (_JEQ, 2, 0, AF_INET),
            (_JEQ, 1, 0, AF_INET6),
            (_RET, 0, 0, _errno(_EACCES)),
            (_RET, 0, 0, _ALLOW),
        ]
    else:
        prog += [(_JEQ, 0, 1, sys_socket), (_RET, 0, 0, _errno(_EACCES))]
    prog += [(_RET, 0, 0, _ALLOW)]
    return prog


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


# --- the same filter through libseccomp (preferred: rules by syscall name, the library's BPF) ---

CLONE_NAMESPACE_FLAGS = (  # CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
    0x00020000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
)
_SCMP_ACT_ALLOW = 0x7FFF0000
_CMP_LT, _CMP_EQ, _CMP_GT, _CMP_MASKED_EQ = 2, 4, 6, 7


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _load_libseccomp() -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


_libseccomp = _load_libseccomp()  # loaded once, before any fork: every snippet inherits it


def install_libseccomp(network: bool) -> bool:
    """The sandbox filter as libseccomp rules, by syscall name; False when the library is absent."""
    lib = _libseccomp
    if lib is None:
        return False
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        return False

    def rule(action: int, name: str, *cmps: tuple[int, int, int, int]) -> None:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:
            return  # not a syscall of this architecture
        array = (_ArgCmp * max(len(cmps), 1))(*[_ArgCmp(*c) for c in cmps])
        if lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), array) != 0:
            raise OSError(ctypes.get_errno(), f"seccomp rule for {name} failed")

    try:
        for name in sorted({n for table in _DENY.values() for n in table}):
            rule(_errno(_EPERM), name)
        # clone3 hides its flags behind a pointer: ENOSYS makes libc fall back to clone
        rule(_errno(_ENOSYS), "clone3")
        for flag in CLONE_NAMESPACE_FLAGS:
            rule(_errno(_EPERM), "clone", (0, _CMP_MASKED_EQ, flag, flag))
        if network:  # TCP/UDP over IPv4/IPv6 only
            rule(_errno(_EACCES), "socket", (0, _CMP_LT, AF_INET, 0))
            rule(_errno(_EACCES), "socket", (0, _CMP_GT, AF_INET6, 0))
            for domain in range(AF_INET + 1, AF_INET6):
                rule(_errno(_EACCES), "socket", (0, _CMP_EQ, domain, 0))
        else:
            rule(_errno(_EACCES), "socket")
        if lib.seccomp_load(ctx) != 0:
            raise OSError(ctypes.get_errno(), "seccomp_load failed")
    finally:
        lib.seccomp_release(ctx)
    return True


def seccomp_backend() -> str:
    return "libseccomp" if _libseccomp is not None else "bpf"


def install_seccomp(network: bool = False) -> bool:
    if install_libseccomp(network):
        return True
    machine = os.uname().machine  # no libseccomp: the hand-built program below, same rules
    if machine not in _ARCH:
        return False
    prog = seccomp_program(machine, network)
    buf = b"".join(struct.pack("HBBI", code, jt, jf, k) for code, jt, jf, k in prog)
    filters = ctypes.create_string_buffer(buf)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog), ctypes.cast(filters, ctypes.c_void_p))
    if _libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    if _libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
        raise OSError(ctypes.get_errno(), "seccomp filter failed")
    return True


# --- landlock (fallback mode) ------------------------------------------------------------------------

_LL_READ = 1 | 4 | 8  # execute, read file, read dir
_LL_ALL = (1 << 13) - 1  # every filesystem right of ABI 1


def _ll_fs_rights(abi: int) -> int:
    """Every filesystem right this kernel's Landlock handles: ABI 2 adds REFER (linking or
    renaming across directories), ABI 3 TRUNCATE, ABI 5 IOCTL_DEV. Handled rights are denied
    outside the granted paths."""
    rights = _LL_ALL
    if abi >= 2:
        rights |= 1 << 13
    if abi >= 3:
        rights |= 1 << 14
    if abi >= 5:
        rights |= 1 << 15
    return rights


def install_landlock(read_paths: list[str], write_paths: list[str]) -> None:
    """Filesystem rules; where the kernel allows, also no TCP and no signals beyond the sandbox."""
    abi = max(int(_libc.syscall(444, None, 0, 1)), 0)
    if (
        abi >= 6
    ):  # + handled_access_net (bind/connect TCP) + scoped (abstract unix sockets, signals)
        attr = struct.pack("QQQ", _ll_fs_rights(abi), 1 | 2, 1 | 2)
    elif abi >= 4:
        attr = struct.pack("QQ", _ll_fs_rights(abi), 1 | 2)
    else:
        attr = struct.pack("Q", _ll_fs_rights(abi))
    ruleset = _libc.syscall(444, attr, len(attr), 0)  # landlock_create_ruleset
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    for paths, rights in ((read_paths, _LL_READ), (write_paths, _ll_fs_rights(abi))):
        for path in paths:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            file_rights = 1 | 2 | 4 | (1 << 14) | (1 << 15)  # execute, write, read, truncate, ioctl
            rule = struct.pack("=Qi", rights if os.path.isdir(path) else rights & file_rights, fd)
            _libc.syscall(445, ruleset, 1, rule, 0)  # landlock_add_rule(LANDLOCK_RULE_PATH_BENEATH)
            os.close(fd)
    if (
        _libc.prctl(38, 1, 0, 0, 0) != 0 or _libc.syscall(446, ruleset, 0) != 0
    ):  # landlock_restrict_self
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(ruleset)


# --- confinement of one child --------------------------------------------------------------------------

CONFIG: dict = {}


def confine() -> None:
    """Called in every forked child before user code: limits, then the syscall filter."""
    limits = CONFIG["limits"]
    os.setpgid(0, 0)
    _libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the worker
    mem = limits["memory_mb"] * 1024 * 1024
    for res, value in (
        (resource.RLIMIT_AS, mem),
        (resource.RLIMIT_CPU, limits["cpu_time_s"]),
        (resource.RLIMIT_NPROC, limits["max_processes"]),
        (resource.RLIMIT_FSIZE, limits["max_file_size_mb"] * 1024 * 1024),
        (resource.RLIMIT_NOFILE, limits["max_open_files"]),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(res, (value, value))
    if CONFIG["mode"] == "landlock":
        install_landlock(CONFIG["read_paths"], CONFIG["write_paths"])
    if CONFIG["mode"] != "unsafe":
        install_seccomp(bool(limits.get("network")))


def run_python(code: str, namespace: dict) -> int:
    try:
        exec(compile(code, "<snippet>", "exec"), namespace)
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        return 1


# --- running snippets -----------------------------------------------------------------------------------


def _collect(
    pid: int, out_r: int, err_r: int, deadline: float, cap: int
) -> tuple[bytes, bytes, int, bool]:
    """Read the child's output until it exits (or the deadline), then reap it.

    A background process that inherited the pipes must not hold the snippet open: once the
    child itself has exited, whatever is buffered is drained and the rest is left to the sweep.
    """
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    sizes = {out_r: 0, err_r: 0}
    open_fds = [out_r, err_r]
    timed_out, status = False, None

    def read_ready(wait: float) -> None:
        ready, _, _ = select.select(open_fds, [], [], wait)
        for fd in ready:
            data = os.read(fd, 65536)
            if not data:
                open_fds.remove(fd)
            elif sizes[fd] < cap:
                chunks[fd].append(data)
                sizes[fd] += len(data)

    while open_fds:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            timed_out = True
            break
        read_ready(min(remaining, 0.05))
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = raw
            while open_fds:  # drain what is already buffered, without waiting for stragglers
                before = sum(sizes.values())
                read_ready(0)
                if sum(sizes.values()) == before:
                    break
            break
    if status is None:
        if timed_out:
            _kill_group(pid)
        _, status = os.waitpid(pid, 0)
    os.close(out_r)
    os.close(err_r)
    code = os.waitstatus_to_exitcode(status)
    return b"".join(chunks[out_r])[:cap], b"".join(chunks[err_r])[:cap], code, timed_out


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def exec_snippet(req: dict) -> dict:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(out_r)
            os.close(err_r)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            null = os.open("/dev/null", os.O_RDONLY)
            os.dup2(null, 0)
            os.closerange(3, 1024)
            sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0), write_through=True)
            sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", buffering=0), write_through=True)
            confine()
            if req.get("language") == "shell":
                os.execv("/bin/sh", ["/bin/sh", "-c", req["code"]])
            code = run_python(req["code"], {"__name__": "__main__"})
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            traceback.print_exc()
            code = 1
        os._exit(code)
    os.close(out_w)
    os.close(err_w)
    out, err, code, timed_out = _collect(
        pid, out_r, err_r, start + req["timeout"], CONFIG["max_output_bytes"]
    )
    return _result(out, err, code, timed_out, start)


def _result(out: bytes, err: bytes, code: int, timed_out: bool, start: float) -> dict:
    return {
        "stdout": out.decode("utf-8", "replace"),
        "stderr": err.decode("utf-8", "replace"),
        "exit_code": code,
        "timed_out": timed_out,
        "duration_ms": (time.monotonic() - start) * 1000,
    }


class Repl:
    """A long-lived confined child that executes snippets in one namespace."""

    def __init__(self) -> None:
        self.pid = 0

    def start(self) -> None:
        req_r, self.req_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(self.req_w)
            os.close(self.resp_r)
            null = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            keep = {req_r, resp_w}
            for fd in range(3, 1024):
                if fd not in keep:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            confine()
            self._serve(req_r, resp_w)
            os._exit(0)
        os.close(req_r)
        os.close(resp_w)
        self.pid = pid
        self.reader = os.fdopen(self.resp_r, "rb")

    @staticmethod
    def _serve(req_r: int, resp_w: int) -> None:
        namespace: dict = {"__name__": "__main__"}
        reader = os.fdopen(req_r, "rb")
        writer = os.fdopen(resp_w, "wb")
        for line in reader:
            code = json.loads(line)["code"]
            out, err = io.StringIO(), io.StringIO()
            sys.stdout, sys.stderr = out, err
            exit_code = run_python(code, namespace)
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
            cap = CONFIG["max_output_bytes"]  # the reply to the worker is bounded too
            writer.write(
                json.dumps(
                    {
                        "stdout": out.getvalue()[:cap],
                        "stderr": err.getvalue()[:cap],
                        "exit_code": exit_code,
                    }
                ).encode()
                + b"\n"
            )
            writer.flush()

    def run(self, req: dict) -> dict:
        start = time.monotonic()
        note = ""
        if not self.pid:
            self.start()
        os.write(self.req_w, json.dumps({"code": req["code"]}).encode() + b"\n")
        ready, _, _ = select.select([self.resp_r], [], [], req["timeout"])
        # bounded: a reply larger than two capped outputs (JSON-escaped) is not read whole
        limit = 12 * CONFIG["max_output_bytes"] + 4096
        line = self.reader.readline(limit) if ready else b""
        if line and not line.endswith(b"\n"):
            self.stop()  # oversized reply: drop this REPL rather than buffer it
            line = b""
        if not line:
            timed_out = not ready
            self.stop()
            note = (
                "\n[the REPL was restarted: its state is lost]"
                if timed_out
                else "\n[the REPL process died; its state is lost]"
            )
            return _result(b"", note.encode(), -9, timed_out, start)
        data = json.loads(line)
        cap = CONFIG["max_output_bytes"]
        return _result(
            data["stdout"].encode()[:cap],
            data["stderr"].encode()[:cap],
            data["exit_code"],
            False,
            start,
        )

    def stop(self) -> None:
        if self.pid:
            _kill_group(self.pid)
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            for fd in (self.req_w,):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.reader.close()
            self.pid = 0


def descendants(root: int) -> list[int]:
    """Every process below ``root``. The worker is a child subreaper, so orphans of snippets are
    reparented to it and stay in this tree; nothing outside the tree is ever touched."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def sweep(keep: set[int]) -> int:
    """Kill the worker's leftover descendants (background processes of finished snippets).

    Each round first stops everything it finds, again and again until no new process appears
    (a stopped process cannot fork, so a fork-hopper that keeps re-parenting itself is caught),
    then kills the lot and reaps it; rounds repeat until nothing is left.
    """
    spared = {pid for pid in keep if pid}  # the REPL itself lives on; its children do not
    killed: set[int] = set()
    deadline = time.monotonic() + 2.0

    def strays() -> list[int]:
        return [p for p in descendants(os.getpid()) if p not in spared]

    while time.monotonic() < deadline:
        if not strays():
            break
        stopped: set[int] = set()
        for _ in range(50):
            new = [p for p in strays() if p not in stopped]
            if not new:
                break
            for pid in new:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                stopped.add(pid)
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        reap_until = time.monotonic() + 0.2
        while time.monotonic() < reap_until:  # orphans are reparented to this subreaper
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                if not strays():
                    break
                time.sleep(0.001)
    return len(killed)


def drop_privileges(uid: int) -> None:
    """Become the sandbox's own uid (the host runs as root); every capability goes with it."""
    if os.getuid() == 0 and uid:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)


def main() -> None:
    CONFIG.update(json.loads(sys.stdin.buffer.readline()))  # never argv: it holds host paths
    sys.path[:] = CONFIG["sys_path"]
    drop_privileges(CONFIG["uid"])
    # Not dumpable: no process of the sandbox (same uid) can open the worker's /proc/<pid>/mem
    # and patch it (say, to make a later grader snippet report success). Forked snippets and
    # the REPL inherit this; graders run as fresh forks of the untouched worker.
    _libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    _libc.prctl(
        1, signal.SIGKILL, 0, 0, 0
    )  # PR_SET_PDEATHSIG (reset by the uid change): die with the host
    _libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come back here to be swept
    os.chdir(CONFIG["workdir"])
    channel = os.fdopen(os.dup(1), "wb")
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 1)
    repl = Repl()
    channel.write(json.dumps({"ready": True, "seccomp": seccomp_backend()}).encode() + b"\n")
    channel.flush()
    for line in sys.stdin.buffer:
        req = json.loads(line)
        op = req.get("op")
        try:
            if op == "exec":
                resp = repl.run(req) if req.get("repl") else exec_snippet(req)
                resp["swept"] = sweep({repl.pid} if repl.pid else set())
            elif op == "write":
                flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                fd = open_beneath(CONFIG["workdir"], req["path"], flags, create_parents=True)
                with os.fdopen(fd, "wb") as f:
                    f.write(bytes.fromhex(req["data"]))
                resp = {"ok": True}
            elif op == "read":
                fd = open_beneath(CONFIG["workdir"], req["path"], os.O_RDONLY)
                with os.fdopen(fd, "rb") as f:
                    resp = {"data": f.read(CONFIG["max_output_bytes"]).hex()}
            elif op == "reset_repl":
                repl.stop()
                resp = {"ok": True}
            else:
                resp = {"error": f"unknown op {op!r}"}
        except Exception as exc:
            resp = {"error": f"{type(exc).__name__}: {exc}"}
        resp["id"] = req.get("id")
        channel.write(json.dumps(resp).encode() + b"\n")
        channel.flush()
    repl.stop()
    sweep(set())


def open_beneath(root: str, path: str, flags: int, create_parents: bool = False) -> int:
    """Open ``path`` beneath ``root`` one component at a time, never following a link.

    Sandboxed code may swap any directory or file for a symlink at any moment; walking with
    ``O_NOFOLLOW`` from a directory descriptor (not checking a path, then opening it) leaves no
    window in which the worker could be sent to a host file.
    """
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise PermissionError(f"{path!r} is not a path inside the sandbox work directory")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create_parents:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=fd)
    finally:
        os.close(fd)


if __name__ == "__main__":
    main()
