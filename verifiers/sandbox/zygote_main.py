"""The sandbox zygote: an interpreter started once per host process, with the worker's code
loaded, that forks each new sandbox's worker and confines it as bubblewrap would. Self-contained
(it imports nothing from verifiers): the host compiles it, like the worker, and sends it on
stdin (``verifiers.sandbox.zygote``).

It never runs code of a sandbox, and it never reads what a sandbox is made of: a request brings
three descriptors (the worker's stdin and stdout, and a pipe holding the sandbox's bubblewrap
options, host paths included), which only the forked child reads. Its memory holds its code, the
worker's code and modules, so a child inherits nothing of another sandbox. Each child becomes
pid 1 of a new pid namespace, then, before any code of the sandbox, applies exactly the options
the cold path hands bubblewrap (``LocalSandbox._bwrap_options``): its own mount, network, IPC,
UTS and cgroup namespaces, a fresh tmpfs root with the same read-only binds, ``/proc``, ``/dev``,
capabilities dropped to setuid/setgid, a new session, a clean environment; then it runs the
worker's ``main``, which drops the uid, loads the filter and serves, as in a cold sandbox.

Over 400 lines, not split: like the worker, it is one code object the host compiles and sends
to an isolated interpreter (``-I -S``) that can import nothing of this project.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]
import _socket
import ctypes
import fcntl
import marshal
import os
import struct
import sys

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_SILENT = 2, 4, 8, 4096, 16384, 32768
MS_SLAVE = 1 << 19
MNT_DETACH, AT_RECURSIVE, AT_EMPTY_PATH = 2, 0x8000, 0x1000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 1, 2, 4
SYS_PIDFD_OPEN, SYS_MOUNT_SETATTR, SYS_PIVOT_ROOT = 434, 442, {"x86_64": 155, "aarch64": 41}
CAPS = {"CAP_SETGID": 6, "CAP_SETUID": 7}
UNSHARE = {
    "--unshare-pid": 0,  # the zygote's fork made the child pid 1 of a namespace of its own
    "--unshare-ipc": CLONE_NEWIPC,
    "--unshare-uts": CLONE_NEWUTS,
    "--unshare-net": CLONE_NEWNET,
    "--unshare-cgroup-try": CLONE_NEWCGROUP,
}
BASE, NEWROOT = "/tmp", "/tmp/newroot"  # where the new root is built (in its own namespace)
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
with open("/proc/sys/kernel/cap_last_cap") as _f:
    LAST_CAP = int(_f.read())


def _check(result: int, what: str) -> int:
    """``result``, or the OSError of a failed step: the child then exits before any code of the
    sandbox runs."""
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


def _set_attr(path: str, flags: int) -> None:
    """``flags`` on the mount at ``path`` and every mount under it (what bubblewrap does to each
    submount of a bind); the others of each mount (``noexec``...) are kept."""
    attr = _MountAttr(flags, 0, 0, 0)
    _check(
        _libc.syscall(SYS_MOUNT_SETATTR, -100, path.encode(), AT_RECURSIVE, ctypes.byref(attr), 32),
        f"mount_setattr {path}",
    )


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            flags | MS_SILENT,
            data.encode() if data else None,
        ),
        f"mount {target}",
    )


def _read_options(fd: int) -> bytearray:
    """The sandbox's options, read into one buffer that is wiped after use: its host paths are
    read by the kernel from this buffer, never copied into a string of the worker."""
    buffer = bytearray(1 << 16)
    size = 0
    while True:
        if size == len(buffer):
            buffer.extend(bytes(len(buffer)))
        view = memoryview(buffer)[size:]
        count = os.readv(fd, [view])
        view.release()
        if not count:
            break
        size += count
    os.close(fd)
    del buffer[size:]
    return buffer


def _split(buffer: bytearray) -> list[tuple[int, int]]:
    """(start, end) of each NUL-terminated option."""
    spans, start = [], 0
    while start < len(buffer):
        end = buffer.index(0, start)
        spans.append((start, end))
        start = end + 1
    return spans


def _open_source(buffer: bytearray, start: int) -> int:
    """An ``O_PATH`` descriptor of the host path at ``buffer[start:]`` (NUL-terminated), opened
    by the kernel from the buffer itself."""
    base = ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))
    return _check(
        _libc.open(ctypes.c_void_p(base + start), os.O_PATH | os.O_CLOEXEC),
        "open a bind source",
    )


def _mkdirs(path: str, mode: int) -> None:
    parts = path.strip("/").split("/")
    for i in range(1, len(parts) + 1):
        current = "/" + "/".join(parts[:i])
        try:
            os.mkdir(current, mode)
        except FileExistsError:
            pass


def _bind(fd: int, dest: str, flags: int) -> None:
    """Bind the source held by ``fd`` at ``dest`` (made as its kind: a directory or a file)."""
    if os.path.isdir(f"/proc/self/fd/{fd}"):
        _mkdirs(dest, 0o755)
    else:
        _mkdirs(os.path.dirname(dest), 0o755)
        os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o444))
    _mount(f"/proc/self/fd/{fd}", dest, None, MS_BIND | MS_REC)
    _set_attr(dest, flags)


def _drop_capabilities(keep: set[int]) -> None:
    """Bounding set and effective, permitted and inheritable sets down to ``keep``."""
    for cap in range(LAST_CAP + 1):
        if cap not in keep:
            _check(_libc.prctl(24, cap, 0, 0, 0), f"PR_CAPBSET_DROP {cap}")  # PR_CAPBSET_DROP
    _libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
    mask = sum(1 << cap for cap in keep)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)(mask, mask, mask, 0, 0, 0)  # effective, permitted, inheritable
    _check(_libc.capset(header, data), "capset")


def _loopback_up() -> None:
    """Bring up ``lo`` in the new network namespace, as bubblewrap does (127.0.0.1 comes with it;
    no snippet can open a socket anyway)."""
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock.fileno(), 0x8913, request))[1]
        fcntl.ioctl(sock.fileno(), 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # IFF_UP
    finally:
        sock.close()


def _dev(dest: str, devices: dict[str, int]) -> None:
    """bubblewrap's ``--dev``: a tmpfs with the harmless devices bound from the host, the
    standard links, ``shm`` and a private ``devpts``."""
    _mkdirs(dest, 0o755)
    _mount("tmpfs", dest, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    for name, fd in devices.items():
        os.close(os.open(f"{dest}/{name}", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o444))
        _mount(f"/proc/self/fd/{fd}", f"{dest}/{name}", None, MS_BIND | MS_REC)
        _set_attr(f"{dest}/{name}", MOUNT_ATTR_NOSUID)
    for name, target in (
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("fd", "/proc/self/fd"),
        ("core", "/proc/kcore"),
    ):
        os.symlink(target, f"{dest}/{name}")
    os.mkdir(f"{dest}/shm", 0o755)
    os.mkdir(f"{dest}/pts", 0o755)
    _mount(
        "devpts",
        f"{dest}/pts",
        "devpts",
        MS_NOSUID | MS_NOEXEC,
        "newinstance,ptmxmode=0666,mode=620",
    )
    os.symlink("pts/ptmx", f"{dest}/ptmx")


def _proc(dest: str) -> None:
    """bubblewrap's ``--proc``: this pid namespace's proc, its writable kernel knobs read-only."""
    _mkdirs(dest, 0o755)
    _mount("proc", dest, "proc", MS_NOSUID | MS_NOEXEC | MS_NODEV)
    for sub in ("sys", "sysrq-trigger", "irq", "bus"):
        path = f"{dest}/{sub}"
        if os.path.exists(path) and os.access(path, os.W_OK):
            _mount(path, path, None, MS_BIND | MS_REC)
            _set_attr(path, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)


def confine(options_fd: int) -> None:
    """Apply the sandbox's bubblewrap options to this process (pid 1 of its namespace)."""
    buffer = _read_options(options_fd)
    try:
        _apply(buffer)
    finally:
        buffer[:] = bytes(len(buffer))


def _apply(buffer: bytearray) -> None:
    spans = _split(buffer)

    def text(i: int) -> str:  # an option or a path the sandbox itself sees: no host path
        return buffer[spans[i][0] : spans[i][1]].decode()

    flags, caps = 0, set[int]()
    env: dict[str, str] | None = None
    # (option, a number: the source's offset in the buffer or the permissions, the path in the
    # sandbox, a link's target)
    steps: list[tuple[str, int, str, str]] = []
    new_session = die_with_parent = False
    i = 0
    while i < len(spans):
        option = text(i)
        if option in UNSHARE:
            flags |= UNSHARE[option]
            i += 1
        elif option == "--die-with-parent":
            die_with_parent, i = True, i + 1
        elif option == "--new-session":
            new_session, i = True, i + 1
        elif option == "--cap-drop" and text(i + 1) == "ALL":
            caps, i = set[int](), i + 2
        elif option == "--cap-add":
            caps.add(CAPS[text(i + 1)])
            i += 2
        elif option in ("--ro-bind", "--bind"):  # the source stays in the buffer
            steps.append((option, spans[i + 1][0], text(i + 2), ""))
            i += 3
        elif option in ("--symlink",):
            steps.append((option, 0, text(i + 2), text(i + 1)))
            i += 3
        elif option == "--perms":
            steps.append((option, int(text(i + 1), 8), "", ""))
            i += 2
        elif option in ("--dir", "--tmpfs", "--proc", "--dev"):
            steps.append((option, 0, text(i + 1), ""))
            i += 2
        elif option == "--clearenv":
            env, i = {}, i + 1
        elif option == "--setenv":
            if env is None:
                raise OSError(22, "--setenv without --clearenv")
            env[text(i + 1)] = text(i + 2)
            i += 3
        else:  # a step this zygote does not know would silently be missing: refuse
            raise OSError(22, f"the zygote cannot apply {option!r}")
    if die_with_parent:
        _libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG SIGKILL: dies with the zygote
    if new_session:
        os.setsid()
    _check(_libc.unshare(flags | CLONE_NEWNS), "unshare")
    if flags & CLONE_NEWNET:
        _loopback_up()
    # every host path is opened now, from the buffer, before the host's tree is covered
    sources = {
        start: _open_source(buffer, start)
        for option, start, _, _ in steps
        if option in ("--ro-bind", "--bind")
    }
    devices = {name: os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC) for name in DEVICES}
    _mount(None, "/", None, MS_SLAVE | MS_REC)
    # as bubblewrap: a tmpfs, and the root is a 0755 directory in it, bound onto itself
    _mount("tmpfs", BASE, "tmpfs", MS_NOSUID | MS_NODEV)
    umask = os.umask(0)
    os.mkdir(NEWROOT, 0o755)
    _mount(NEWROOT, NEWROOT, None, MS_BIND | MS_REC)
    perms = None
    links: list[str] = []  # made here: a path through one is checked to stay inside
    for option, value, dest, link in steps:
        target = NEWROOT + dest
        if option == "--perms":
            perms = value
            continue
        # built before the pivot: a path through an absolute link made here would reach the host
        if any(target.startswith(made + "/") for made in links) and not (
            os.path.realpath(os.path.dirname(target)) + "/"
        ).startswith(NEWROOT + "/"):
            raise OSError(22, f"{dest} is not inside the new root")
        if option == "--ro-bind":
            _bind(sources[value], target, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
        elif option == "--bind":
            _bind(sources[value], target, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
        elif option == "--symlink":
            _mkdirs(os.path.dirname(target), 0o755)
            os.symlink(link, target)
            links.append(target)
        elif option == "--dir":
            _mkdirs(target, 0o755)
            os.chmod(target, 0o755 if perms is None else perms)
        elif option == "--tmpfs":
            _mkdirs(target, 0o755)
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={perms or 0o755:o}")
        elif option == "--proc":
            _proc(target)
        elif option == "--dev":
            _dev(target, devices)
        perms = None
    os.umask(umask)
    for fd in (*sources.values(), *devices.values()):
        os.close(fd)
    os.chdir(NEWROOT)
    _check(_libc.syscall(SYS_PIVOT_ROOT[os.uname().machine], b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount the host's root")
    os.chdir("/")
    _drop_capabilities(caps)
    if env is not None:
        os.environ.clear()
        os.environ.update(env, PWD="/")  # bubblewrap's, for a host cwd the sandbox lacks


def _fds(ancillary: list) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(data) - len(data) % 4
            fds += [int.from_bytes(data[j : j + 4], sys.byteorder) for j in range(0, usable, 4)]
    return fds


def _reap(*_: object) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return


def serve(control: int, worker: dict) -> None:
    """Fork a confined worker per request until the host closes the socket."""
    sock = _socket.socket(fileno=control)
    own_pid_ns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    _signal.signal(_signal.SIGCHLD, _reap)
    sock.sendmsg([b"ready"])
    while True:
        message, ancillary, _, _ = sock.recvmsg(16, _socket.CMSG_SPACE(3 * 4))
        fds = _fds(ancillary)
        if not message or len(fds) != 3:
            for fd in fds:
                os.close(fd)
            if not message:
                return
            continue
        _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGCHLD})
        pid, pidfd = -1, -1
        try:
            _check(_libc.unshare(CLONE_NEWPID), "unshare(CLONE_NEWPID)")
            try:
                pid = os.fork()
                if pid == 0:
                    sock.detach()  # closed below with every other descriptor of the zygote
                    _child(fds, worker)
            finally:  # the next fork gets a namespace of its own again (a failed one too)
                _check(_libc.setns(own_pid_ns, CLONE_NEWPID), "setns back")
            pidfd = _check(_libc.syscall(SYS_PIDFD_OPEN, pid, 0), "pidfd_open")
        except OSError as error:
            sock.sendmsg([b"error %d" % (error.errno or 0)])
        else:
            sock.sendmsg(
                [b"%d" % pid],
                [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, pidfd.to_bytes(4, sys.byteorder))],
            )
        finally:
            for fd in (*fds, pidfd):
                if fd >= 0:
                    os.close(fd)
            _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGCHLD})


def _child(fds: list[int], worker: dict) -> None:
    """The forked worker: confined, then the worker's own ``main``. Never returns."""
    code = 1
    try:
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)  # the worker reaps its own children
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, {_signal.SIGCHLD})
        stdin, stdout, options = fds
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        os.write(1, b"\n")  # started: the host moves this process into the sandbox's budget
        keep = options
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 16)
        confine(keep)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # the worker's
        worker["main"]()
        code = 0
    except BaseException:
        pass
    os._exit(code)


def main() -> None:
    stream = sys.stdin.buffer
    control = int(stream.readline())
    worker: dict = {"__name__": "vf_sandbox_worker"}
    exec(marshal.loads(stream.read(int(stream.readline()))), worker)
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.close(null)
    # No parent-death signal: it fires when the host *thread* that started the zygote exits
    # (a thread pool's). The host's death closes the control socket, which ends ``serve``;
    # every worker has the zygote as its parent-death signal's parent, so they go with it.
    serve(control, worker)


if __name__ == "__main__":
    main()
