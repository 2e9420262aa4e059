"""The process that runs inside a sandbox. Self-contained: it imports nothing from verifiers,
and it is one file (over 400 lines) on purpose: the host compiles it once and hands the code
object to a tiny ``-c`` bootstrap over stdin (``verifiers.sandbox.view.worker_code``), and inside
the sandbox nothing of this project can be imported.

It starts on every cold sandbox, so it imports only what is cheap: ``_json`` (the C half of
``json``, without the ``re`` and ``enum`` that ``json`` and ``signal`` pull in), ``_ctypes``
(the C half of ``ctypes``, for the few libc calls it makes), ``_signal``'s constants, and the interpreter's own ``sys.__excepthook__`` for tracebacks instead of
``traceback``; together about half of the worker's start.

Started once per sandbox (pre-warmed), it drops to the sandbox's uid, then serves requests over
stdin/stdout (one JSON object per line). Each snippet runs in a forked child with rlimits and a
seccomp filter (loaded once into the worker, inherited by every child; plus Landlock in the
fallback mode); a persistent REPL child keeps Python state between snippets for PythonEnv. After
every snippet, leftover processes of the sandbox are killed.
"""

from __future__ import annotations

import _json
import errno
import gc
import io
import os
import resource
import select
import sys
import time
from _ctypes import (  # ``ctypes``' own C half
    FUNCFLAG_CDECL,
    FUNCFLAG_USE_ERRNO,
    CFuncPtr,
    Structure,
    _SimpleCData,
    addressof,
    byref,
    dlopen,
    get_errno,
)
from _signal import (  # type: ignore[import-not-found]  # ``signal`` imports enum
    SIGCONT,
    SIGKILL,
    SIGSTOP,
)

# --- JSON lines, through ``_json`` alone ------------------------------------------------------------


class _Strict:
    """What ``_json.make_scanner`` reads from its context: what ``json.loads`` passes by default."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int

    @staticmethod
    def parse_constant(name: str) -> float:
        return float(name.replace("Infinity", "inf"))


def _unencodable(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


_scan = _json.make_scanner(_Strict)  # type: ignore[arg-type]  # typeshed: its own type
# json.dumps' defaults (ASCII, ", " and ": ", NaN allowed), without the circular check: every
# message is a fresh dict of strings and numbers
_encode = _json.make_encoder(
    None, _unencodable, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True
)
_SPACE = " \t\n\r"


def loads(line: bytes) -> dict:
    """``json.loads`` of one message: the same C scanner, and a ``ValueError`` for anything that
    is not exactly one JSON object."""
    text = line.decode().strip(_SPACE)
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("not JSON") from None
    if end != len(text) or not isinstance(value, dict):
        raise ValueError("a message is one JSON object")
    return value


def dumps(value: object) -> bytes:
    """``json.dumps(value).encode()`` plus the newline that ends a message (ASCII, like it)."""
    return "".join(_encode(value, 0)).encode() + b"\n"


# --- seccomp ---------------------------------------------------------------------------------------


# The C types and libc calls the worker makes, from ``_ctypes`` itself: ``import ctypes`` was
# about 5 ms of CPU of every cold start (its module, ``struct`` and a first callback), this 1 ms.
class _CInt(_SimpleCData):
    _type_ = "i"


class _CLong(_SimpleCData):
    _type_ = "l"


class _CUShort(_SimpleCData):
    _type_ = "H"


class _CVoidP(_SimpleCData):
    _type_ = "P"


class _CChar(_SimpleCData):
    _type_ = "c"


class _IntCall(CFuncPtr):  # what ``ctypes.CDLL(None, use_errno=True)`` makes of a name
    _flags_ = FUNCFLAG_CDECL | FUNCFLAG_USE_ERRNO
    _restype_ = _CInt


class _LongCall(CFuncPtr):  # the metaclass reads ``_flags_`` from the class itself
    _flags_ = FUNCFLAG_CDECL | FUNCFLAG_USE_ERRNO
    _restype_ = _CLong


class _Libc:
    """This process's C library, as ``ctypes.CDLL(None)`` (``CFuncPtr`` reads ``_handle``)."""

    _handle = dlopen(None, 0)  # type: ignore[arg-type]  # NULL: this process's own symbols

    def __init__(self) -> None:
        self.prctl = _IntCall(("prctl", self))  # type: ignore[arg-type]  # reads ``_handle``
        self.syscall = _LongCall(("syscall", self))  # type: ignore[arg-type]


_libc = _Libc()


class _SockFprog(Structure):
    _fields_ = [("len", _CUShort), ("filter", _CVoidP)]


_FILTER: list = []  # the host's BPF program as a ready sock_fprog (and the buffer it points to)


def prepare_seccomp(program: bytes) -> None:
    """Build the ``sock_fprog`` once, in the worker: each child then only makes two calls."""
    buffer = (_CChar * len(program)).from_buffer_copy(program)
    _FILTER[:] = [_SockFprog(len(program) // 8, addressof(buffer)), buffer]


def install_seccomp() -> None:
    """Load the filter the host built (``verifiers.sandbox.seccomp``): no new privileges, then
    the BPF program. Done once, in the worker itself (the worker needs none of what it refuses):
    every snippet's child and the REPL inherit it, and none pays the kernel's filter set-up
    again (about 0.3 ms a fork)."""
    if _libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    if _libc.prctl(22, 2, byref(_FILTER[0]), 0, 0) != 0:  # SECCOMP_MODE_FILTER
        raise OSError(get_errno(), "seccomp filter failed")


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


_RULESET: list[int] = []  # the Landlock ruleset, built once by the worker (fallback mode)


def prepare_landlock(read_paths: list[str], write_paths: list[str]) -> None:
    """Build the ruleset once, in the worker (building one restricts nobody): each child then
    only enforces it, one syscall instead of a ruleset and a rule per path."""
    _RULESET[:] = [build_ruleset(read_paths, write_paths)]


def enforce_landlock() -> None:
    """In a child: no new privileges, then the worker's ruleset, which it then closes."""
    if _libc.prctl(38, 1, 0, 0, 0) != 0 or _libc.syscall(446, _RULESET[0], 0) != 0:
        raise OSError(get_errno(), "landlock_restrict_self failed")
    os.close(_RULESET[0])


def kept_fds() -> set[int]:
    """Descriptors a child keeps open until it is confined (the prepared ruleset)."""
    return set(_RULESET)


def close_fds_but(keep: set[int]) -> None:
    low = 3
    for fd in sorted(keep):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, 1024)


def build_ruleset(read_paths: list[str], write_paths: list[str]) -> int:
    """Filesystem rules; where the kernel allows, also no TCP and no signals beyond the sandbox."""
    import struct  # here: only the Landlock mode needs it, and bwrap's cold start skips it

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
        raise OSError(get_errno(), "landlock_create_ruleset failed")
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
    return ruleset


# --- confinement of one child --------------------------------------------------------------------------

CONFIG: dict = {}
_RLIMITS: list[tuple[int, tuple[int, int]]] = []
_STREAMS: list = []  # stdout and stderr over fds 1 and 2, made once: a child only dup2s onto them
_NULL: list[int] = []  # /dev/null, read-only, opened once: a snippet's stdin is a dup2 of it


def prepare_confinement() -> None:
    """Everything a child needs, made in the worker before the first fork: each snippet's
    child then touches (and copies) as few pages as it can."""
    limits = CONFIG["limits"]
    for res, value in (
        (resource.RLIMIT_AS, limits["memory_mb"] * 1024 * 1024),
        (resource.RLIMIT_CPU, limits["cpu_time_s"]),
        (resource.RLIMIT_NPROC, limits["max_processes"]),
        (resource.RLIMIT_FSIZE, limits["max_file_size_mb"] * 1024 * 1024),
        (resource.RLIMIT_NOFILE, limits["max_open_files"]),
        (resource.RLIMIT_CORE, 0),
    ):
        _RLIMITS.append((res, (value, value)))
    program = bytes.fromhex(CONFIG.pop("seccomp", ""))
    if program:
        prepare_seccomp(program)
    _NULL.append(os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC))
    for fd in (1, 2):
        _STREAMS.append(io.TextIOWrapper(io.FileIO(fd, "wb", closefd=False), write_through=True))


def confine() -> None:
    """Called in every forked child before user code: its own process group and limits (and
    Landlock in the fallback mode). The syscall filter is already there: the worker loaded it
    into itself before its first request, and a filter is inherited and cannot be removed."""
    os.setpgid(0, 0)
    if CONFIG["mode"] != "bwrap":  # in bwrap, the worker's exit ends the pid namespace
        _libc.prctl(1, SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the worker
    for res, pair in _RLIMITS:
        resource.setrlimit(res, pair)
    if CONFIG["mode"] == "landlock":
        enforce_landlock()


def run_python(code: str, namespace: dict) -> int:
    try:
        exec(compile(code, "<snippet>", "exec"), namespace)
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        sys.__excepthook__(*sys.exc_info())  # what ``traceback.print_exc()`` prints
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
        os.killpg(pid, SIGKILL)
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
            os.dup2(_NULL[0], 0)  # then closed with the rest
            close_fds_but(kept_fds())
            sys.stdout, sys.stderr = _STREAMS
            confine()
            if req.get("language") == "shell":
                os.execv("/bin/sh", ["/bin/sh", "-c", req["code"]])
            code = run_python(req["code"], {"__name__": "__main__"})
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            sys.__excepthook__(*sys.exc_info())
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


RESTARTED_FOR_SNIPPET = (
    "[the REPL was restarted before a fresh snippet ran: processes it had started were killed, "
    "and its state is lost]\n"
)


class Repl:
    """A long-lived confined child that executes snippets in one namespace."""

    def __init__(self) -> None:
        self.pid = 0
        self.note = ""  # why the REPL was restarted, told with the next REPL reply

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
            keep = {req_r, resp_w, *kept_fds()}
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
            code = loads(line)["code"]
            out, err = io.StringIO(), io.StringIO()
            sys.stdout, sys.stderr = out, err
            exit_code = run_python(code, namespace)
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
            cap = CONFIG["max_output_bytes"]  # the reply to the worker is bounded too
            writer.write(
                dumps(
                    {
                        "stdout": out.getvalue()[:cap],
                        "stderr": err.getvalue()[:cap],
                        "exit_code": exit_code,
                    }
                )
            )
            writer.flush()

    def run(self, req: dict) -> dict:
        """Run the model's code in its REPL. Its own code can shape what comes back (that is
        what a REPL is): this is the model's tool, never a grader."""
        start = time.monotonic()
        note = ""
        if not self.pid:
            self.start()
        os.write(self.req_w, dumps({"code": req["code"]}))
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
        cap = CONFIG["max_output_bytes"]
        try:  # the REPL is the model's: its reply is checked like any other input
            data = loads(line)
            out, err, code = data["stdout"], data["stderr"], data["exit_code"]
            if not (isinstance(out, str) and isinstance(err, str) and type(code) is int):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            self.stop()
            note = "\n[the REPL answered something that is not a result; it was restarted]"
            return _result(b"", note.encode(), -9, False, start)
        note, self.note = self.note, ""
        return _result(out.encode()[:cap], (note + err).encode()[:cap], code, False, start)

    def pause(self) -> None:
        """Stop every thread of the REPL until ``resume``: whatever the model left running in
        it cannot reach another snippet's process (its ``/proc/PID/fd``, its memory) or start
        new ones meanwhile. Returns once the kernel reports it stopped."""
        if not self.pid:
            return
        deadline = time.monotonic() + 1.0
        try:
            os.kill(self.pid, SIGSTOP)
            while (done := os.waitpid(self.pid, os.WUNTRACED | os.WNOHANG))[0] == 0:
                if time.monotonic() > deadline:  # it would not stop (it never should)
                    return self.stop()
                time.sleep(0.0002)
        except (ProcessLookupError, ChildProcessError):
            done = (self.pid, 0)
        if not os.WIFSTOPPED(done[1]):  # it had died: nothing left to pause
            self.pid = 0
            self._close()

    def resume(self) -> None:
        if self.pid:
            try:
                os.kill(self.pid, SIGCONT)
            except ProcessLookupError:
                pass

    def stop(self, note: str = "") -> None:
        if self.pid:
            self.note = note
            _kill_group(self.pid)
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = 0
            self._close()

    def _close(self) -> None:
        try:
            os.close(self.req_w)
        except OSError:
            pass
        self.reader.close()


def descendants(root: int) -> list[int]:
    """Every process below ``root``. The worker is a child subreaper, so orphans of snippets are
    reparented to it and stay in this tree; nothing outside the tree is ever touched. Only
    processes of this uid are read (a descendant cannot change its uid: no new privileges),
    which keeps the scan short where /proc shows the whole host (landlock mode)."""
    uid = os.getuid()
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            with open(f"/proc/{entry.name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _children(pid: int) -> list[bytes] | None:
    """The children of every thread of ``pid`` (``/proc/PID/task/TID/children``); None where
    this kernel has no such file."""
    found: list[bytes] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found += f.read().split()
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None if pid == os.getpid() else []
    return found


def _maybe_strays(spared: set[int]) -> bool:
    """Whether a leftover can exist, without walking ``/proc`` (which costs more than the
    snippet where ``/proc`` shows the whole host). Every process of the sandbox descends from a
    direct child of this worker (it is their subreaper) or of a spared, stopped REPL: a process
    that exits stays listed (as a zombie) until reaped, and its children are listed at the
    subreaper before it goes, so the spared REPLs are read first, then the worker. Only a
    running REPL could add a child between the two reads; that case gets the full walk."""
    for pid in spared:
        if not _stopped(pid) or _children(pid):
            return True
    mine = _children(os.getpid())
    return mine is None or any(int(child) not in spared for child in mine)


_WALL = 0x40000000  # Linux's __WALL: children made by clone() with no exit signal count too


def _childless() -> bool:
    """Whether this worker has no child at all, running, stopped or a zombie: one ``waitid``
    that reaps nothing (``WNOWAIT``) and fails with ``ECHILD`` only then, for the children of
    every thread. With no REPL, that is the common case after a snippet, and then nothing of the
    sandbox but the worker exists: every other process descends from one of its children (it
    is their subreaper, and a reaped snippet's orphans were reparented to it before the snippet
    became a zombie). ``__WALL``: a child that exits with no signal to its parent (a raw
    ``clone``) is a child all the same. Reading ``/proc`` for the same answer cost a fresh snippet's worker about
    60 us and a dozen page faults of copy-on-write after its fork."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WSTOPPED | os.WNOHANG | os.WNOWAIT | _WALL)
    except ChildProcessError:
        return True
    return False


def _stopped(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return True  # gone: nothing of it can run


def sweep(keep: set[int]) -> int:
    """Kill the worker's leftover descendants (background processes of finished snippets).

    Each round first stops everything it finds, again and again until no new process appears
    (a stopped process cannot fork, so a fork-hopper that keeps re-parenting itself is caught),
    then kills the lot and reaps it; rounds repeat until nothing is left.
    """
    spared = {pid for pid in keep if pid}  # the REPL itself lives on; its children do not
    if not spared and _childless():
        return 0
    if not _maybe_strays(spared):
        return 0
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
                _signal(pid, SIGSTOP)
                stopped.add(pid)
        for pid in stopped:
            if _signal(pid, SIGKILL):
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


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def warm_up() -> None:
    """Pay, once in the worker, what every forked snippet would otherwise pay again: the first
    ``compile()`` of a process builds the AST types (about 3 ms, most of a ``print(1)``)."""
    exec(compile("pass", "<warm-up>", "exec"), {})
    for stream in _STREAMS:
        stream.write("")


def drop_privileges(uid: int) -> None:
    """Become the sandbox's own uid (the host runs as root); every capability goes with it."""
    if os.getuid() == 0 and uid:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)


def main() -> None:
    CONFIG.update(loads(sys.stdin.buffer.readline()))  # never argv: it holds host paths
    prepare_confinement()
    sys.path[:] = CONFIG["sys_path"]
    drop_privileges(CONFIG["uid"])
    # Not dumpable: no process of the sandbox (same uid) can open the worker's /proc/<pid>/mem
    # and patch it (say, to make a later grader snippet report success). Forked snippets and
    # the REPL inherit this; graders run as fresh forks of the untouched worker.
    _libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
    _libc.prctl(
        1, SIGKILL, 0, 0, 0
    )  # PR_SET_PDEATHSIG (reset by the uid change): die with the host
    _libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come back here to be swept
    os.chdir(CONFIG["workdir"])
    if _FILTER:
        install_seccomp()
    if CONFIG["mode"] == "landlock":
        prepare_landlock(CONFIG["read_paths"], CONFIG["write_paths"])
    channel = os.fdopen(os.dup(1), "wb")
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 1)
    repl = Repl()
    warm_up()
    gc.freeze()  # what the worker holds is never scanned again: forks share those pages
    channel.write(dumps({"ready": True}))
    channel.flush()
    for line in sys.stdin.buffer:
        req = loads(line)
        op = req.get("op")
        try:
            if op == "exec" and req.get("repl"):
                resp = repl.run(req)
                resp["swept"] = sweep({repl.pid})
            elif op == "exec":  # a fresh fork of this worker, with the REPL frozen meanwhile
                repl.pause()
                swept = sweep({repl.pid}) if repl.pid else 0
                if repl.pid and _children(repl.pid):
                    # what the sweep killed stays a zombie until the frozen REPL reaps it, and
                    # zombies hold the sandbox's process budget: the REPL goes (they are then
                    # this subreaper's to reap), so the snippet can always start its processes
                    repl.stop(RESTARTED_FOR_SNIPPET)
                    swept += sweep(set())
                resp = exec_snippet(req)
                resp["swept"] = swept + sweep({repl.pid})
                repl.resume()
            elif op == "write":
                flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                fd = open_file_beneath(CONFIG["workdir"], req["path"], flags, create_parents=True)
                with os.fdopen(fd, "wb") as f:
                    f.write(bytes.fromhex(req["data"]))
                resp = {"ok": True}
            elif op == "read":
                fd = open_file_beneath(CONFIG["workdir"], req["path"], os.O_RDONLY)
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
        channel.write(dumps(resp))
        channel.flush()
    repl.stop()
    sweep(set())


FILE_KINDS = {
    0o010000: "a FIFO",
    0o020000: "a character device",
    0o040000: "a directory",
    0o060000: "a block device",
    0o140000: "a socket",
}
"""``st_mode``'s file types (``stat.S_IFMT``) other than a regular file's, as an error names them."""


def open_file_beneath(root: str, path: str, flags: int, create_parents: bool = False) -> int:
    """``open_beneath`` for a transfer: a regular file only, refused at once otherwise. The open
    does not block (``O_NONBLOCK``: a FIFO's waits for the other end, and a download stalled
    until its request timed out) and what was opened is checked (``fstat``), not the path."""
    try:
        fd = open_beneath(root, path, flags | os.O_NONBLOCK, create_parents)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link, not followed
            raise PermissionError(f"{path!r} is (or passes through) a symbolic link") from None
        if exc.errno == errno.ENXIO:  # a FIFO nothing reads, opened to write
            raise PermissionError(f"{path!r} is a FIFO, not a regular file") from None
        raise
    kind = FILE_KINDS.get(os.fstat(fd).st_mode & 0o170000)
    if kind is not None:
        os.close(fd)
        raise PermissionError(f"{path!r} is {kind}, not a regular file: only files are transferred")
    os.set_blocking(fd, True)
    return fd


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
