"""The sandbox's syscall filter, built once per process on the host and handed to each worker.

libseccomp (Debian's ``libseccomp2``) builds it from rules by syscall name and exports the BPF
program (``seccomp_export_bpf``); without the library, an equivalent program is assembled by
hand. The worker loads the bytes into itself with ``prctl(PR_SET_SECCOMP)`` before its first
request, so every snippet's child and the REPL inherit the filter (it cannot be removed), no
snippet pays for building or loading it, and the worker never loads libseccomp. What the filter
refuses:

- escapes and kernel control: ptrace, mount and the new mount API, pivot_root, chroot,
  unshare/setns and namespace flags to clone (clone3 answers ENOSYS, so libc falls back to
  clone, whose flags can be read), bpf, perf_event_open, modules, kexec, keyrings,
  userfaultfd, io_uring, handles, quotas, clocks, swap, reboot, I/O ports;
- cross-process access: process_vm_readv/writev, pidfd_getfd, process_madvise, kcmp;
- legacy interfaces: modify_ldt, uselib, _sysctl, ustat, sysfs, nfsservctl, the old module
  calls, lookup_dcookie, and ``personality`` with anything but the default persona (0) or a
  query (0xffffffff): no READ_IMPLIES_EXEC, no ADDR_NO_RANDOMIZE;
- sockets: every ``socket(2)`` (so no unix socket of the host, pathname or abstract, and no
  netlink or raw socket); with ``network=True``, IPv4/IPv6 only. ``socketpair(2)`` stays.
- any other ABI: x32 syscalls and foreign architectures kill the snippet;
- in landlock mode (the host's IPC namespace): System V IPC and POSIX message queues.
"""

from __future__ import annotations

import ctypes
import os
import struct
from functools import cache

DENIED = (  # by name; a name this architecture lacks is skipped
    "ptrace mount umount2 pivot_root chroot unshare setns bpf kexec_load kexec_file_load "
    "init_module finit_module delete_module reboot swapon swapoff perf_event_open keyctl add_key "
    "request_key userfaultfd process_vm_readv process_vm_writev io_uring_setup io_uring_enter "
    "io_uring_register open_by_handle_at name_to_handle_at acct settimeofday clock_settime "
    "adjtimex syslog quotactl quotactl_fd open_tree move_mount fsopen fsconfig fsmount fspick "
    "mount_setattr ioperm iopl vhangup pidfd_getfd process_madvise kcmp modify_ldt uselib "
    "_sysctl ustat sysfs nfsservctl create_module get_kernel_syms query_module lookup_dcookie"
).split()


# System V IPC and POSIX message queues: objects that outlive every process that made them, in
# the IPC namespace. bwrap gives each sandbox one of its own (gone with it); in landlock mode it
# is the host's, so there the filter refuses them (a sandbox could otherwise leave shared memory
# no budget counts, take every id of the host, or share it with another sandbox).
HOST_IPC = (
    "shmget shmat shmdt shmctl semget semop semtimedop semctl msgget msgsnd msgrcv msgctl "
    "mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr"
).split()


def _numbers(table: str) -> dict[str, int]:
    return {name: int(nr) for name, _, nr in (item.partition("=") for item in table.split())}


NUMBERS = {  # for the hand-built program (no libseccomp): the same names, by number
    "x86_64": _numbers(
        "ptrace=101 mount=165 umount2=166 pivot_root=155 chroot=161 unshare=272 setns=308 "
        "bpf=321 kexec_load=246 kexec_file_load=320 init_module=175 finit_module=313 "
        "delete_module=176 reboot=169 swapon=167 swapoff=168 perf_event_open=298 keyctl=250 "
        "add_key=248 request_key=249 userfaultfd=323 process_vm_readv=310 process_vm_writev=311 "
        "io_uring_setup=425 io_uring_enter=426 io_uring_register=427 open_by_handle_at=304 "
        "name_to_handle_at=303 acct=163 settimeofday=164 clock_settime=227 adjtimex=159 "
        "syslog=103 quotactl=179 quotactl_fd=443 open_tree=428 move_mount=429 fsopen=430 "
        "fsconfig=431 fsmount=432 fspick=433 mount_setattr=442 ioperm=173 iopl=172 vhangup=153 "
        "pidfd_getfd=438 process_madvise=440 kcmp=312 modify_ldt=154 uselib=134 _sysctl=156 "
        "ustat=136 sysfs=139 nfsservctl=180 create_module=174 get_kernel_syms=177 "
        "query_module=178 lookup_dcookie=212 "
    ),
    "aarch64": _numbers(
        "ptrace=117 mount=40 umount2=39 pivot_root=41 chroot=51 unshare=97 setns=268 bpf=280 "
        "kexec_load=104 kexec_file_load=294 init_module=105 finit_module=273 delete_module=106 "
        "reboot=142 swapon=224 swapoff=225 perf_event_open=241 keyctl=219 add_key=217 "
        "request_key=218 userfaultfd=282 process_vm_readv=270 process_vm_writev=271 "
        "io_uring_setup=425 io_uring_enter=426 io_uring_register=427 open_by_handle_at=265 "
        "name_to_handle_at=264 acct=89 settimeofday=170 clock_settime=112 adjtimex=171 "
        "syslog=116 quotactl=60 quotactl_fd=443 open_tree=428 move_mount=429 fsopen=430 "
        "fsconfig=431 fsmount=432 fspick=433 mount_setattr=442 pidfd_getfd=438 "
        "process_madvise=440 kcmp=272 lookup_dcookie=18 "
    ),
}
IPC_NUMBERS = {
    "x86_64": _numbers(
        "shmget=29 shmat=30 shmctl=31 shmdt=67 semget=64 semop=65 semctl=66 semtimedop=220 "
        "msgget=68 msgsnd=69 msgrcv=70 msgctl=71 mq_open=240 mq_unlink=241 mq_timedsend=242 "
        "mq_timedreceive=243 mq_notify=244 mq_getsetattr=245"
    ),
    "aarch64": _numbers(
        "mq_open=180 mq_unlink=181 mq_timedsend=182 mq_timedreceive=183 mq_notify=184 "
        "mq_getsetattr=185 msgget=186 msgctl=187 msgrcv=188 msgsnd=189 semget=190 semctl=191 "
        "semtimedop=192 semop=193 shmget=194 shmctl=195 shmat=196 shmdt=197"
    ),
}
# audit arch, socket, clone, clone3, personality
ARCH = {"x86_64": (0xC000003E, 41, 56, 435, 135), "aarch64": (0xC00000B7, 198, 220, 435, 92)}
# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
CLONE_NAMESPACE_FLAGS = (
    0x20000,
    0x2000000,
    0x4000000,
    0x8000000,
    0x10000000,
    0x20000000,
    0x40000000,
)
PERSONA_QUERY = 0xFFFFFFFF
AF_INET, AF_INET6 = 2, 10
EPERM, EACCES, ENOSYS = 1, 13, 38
_LD, _JEQ, _JSET, _JGE, _RET = 0x20, 0x15, 0x45, 0x35, 0x06
_ALLOW, _KILL = 0x7FFF0000, 0x80000000
_CMP_LT, _CMP_EQ, _CMP_GT, _CMP_MASKED_EQ = 2, 4, 6, 7


def _errno(n: int) -> int:
    return 0x00050000 | n


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


@cache
def _libseccomp() -> ctypes.CDLL | None:
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
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def backend() -> str:
    """Who builds the filter here: "libseccomp", or "bpf" (the hand-built program)."""
    return "libseccomp" if _libseccomp() is not None else "bpf"


@cache
def program(network: bool, host_ipc: bool = False) -> bytes:
    """The filter as ``struct sock_filter`` bytes, for ``prctl(PR_SET_SECCOMP)``;
    ``host_ipc``: the sandbox shares the host's IPC namespace (landlock mode), so ``HOST_IPC``
    is refused too."""
    built = _with_libseccomp(network, host_ipc)
    if built is not None:
        return built
    machine = os.uname().machine
    if machine not in ARCH:
        raise OSError(f"no seccomp filter for {machine} without libseccomp (install libseccomp2)")
    return b"".join(struct.pack("HBBI", *insn) for insn in _by_hand(machine, network, host_ipc))


def _with_libseccomp(network: bool, host_ipc: bool) -> bytes | None:
    lib = _libseccomp()
    if lib is None:
        return None
    ctx = lib.seccomp_init(_ALLOW)
    if not ctx:
        return None

    def rule(action: int, name: str, *cmps: tuple[int, int, int, int]) -> None:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:
            return  # not a syscall of this architecture
        array = (_ArgCmp * max(len(cmps), 1))(*[_ArgCmp(*c) for c in cmps])
        if lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), array) != 0:
            raise OSError(ctypes.get_errno(), f"seccomp rule for {name} failed")

    try:
        for name in (*DENIED, *(HOST_IPC if host_ipc else ())):
            rule(_errno(EPERM), name)
        rule(_errno(ENOSYS), "clone3")
        for flag in CLONE_NAMESPACE_FLAGS:
            rule(_errno(EPERM), "clone", (0, _CMP_MASKED_EQ, flag, flag))
        # personality: only 0 and the query (the kernel reads the low 32 bits). One comparison
        # per rule (libseccomp allows no more on one argument): every 32-bit value that has a
        # set bit followed (cyclically) by a clear one, which is every value but 0 and ~0.
        for bit in range(32):
            mask = (1 << bit) | (1 << ((bit + 1) % 32))
            rule(_errno(EPERM), "personality", (0, _CMP_MASKED_EQ, mask, 1 << bit))
        if network:
            rule(_errno(EACCES), "socket", (0, _CMP_LT, AF_INET, 0))
            rule(_errno(EACCES), "socket", (0, _CMP_GT, AF_INET6, 0))
            for domain in range(AF_INET + 1, AF_INET6):
                rule(_errno(EACCES), "socket", (0, _CMP_EQ, domain, 0))
        else:
            rule(_errno(EACCES), "socket")
        read_end, write_end = os.pipe()
        try:
            if lib.seccomp_export_bpf(ctx, write_end) != 0:
                raise OSError(ctypes.get_errno(), "seccomp_export_bpf failed")
            os.close(write_end)
            write_end = -1
            chunks = []
            while chunk := os.read(read_end, 1 << 16):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
    finally:
        lib.seccomp_release(ctx)


def _by_hand(machine: str, network: bool, host_ipc: bool) -> list[tuple[int, int, int, int]]:
    arch, sys_socket, sys_clone, sys_clone3, sys_personality = ARCH[machine]
    prog = [(_LD, 0, 0, 4), (_JEQ, 1, 0, arch), (_RET, 0, 0, _KILL), (_LD, 0, 0, 0)]
    if machine == "x86_64":
        prog += [(_JGE, 0, 1, 0x40000000), (_RET, 0, 0, _KILL)]  # the x32 ABI
    denied = [*NUMBERS[machine].values(), *(IPC_NUMBERS[machine].values() if host_ipc else ())]
    for nr in denied:
        prog += [(_JEQ, 0, 1, nr), (_RET, 0, 0, _errno(EPERM))]
    prog += [(_JEQ, 0, 1, sys_clone3), (_RET, 0, 0, _errno(ENOSYS))]
    clone_ns = 0
    for flag in CLONE_NAMESPACE_FLAGS:
        clone_ns |= flag
    prog += [(_JEQ, 0, 3, sys_clone), (_LD, 0, 0, 16), (_JSET, 0, 1, clone_ns)]
    prog += [(_RET, 0, 0, _errno(EPERM)), (_LD, 0, 0, 0)]
    # personality(arg): the low 32 bits (all the kernel reads) must be 0 or ~0
    prog += [
        (_JEQ, 0, 4, sys_personality),
        (_LD, 0, 0, 16),
        (_JEQ, 2, 0, 0),
        (_JEQ, 1, 0, PERSONA_QUERY),
        (_RET, 0, 0, _errno(EPERM)),
        (_LD, 0, 0, 0),
    ]
    if network:
        prog += [
            (_JEQ, 0, 5, sys_socket),
            (_LD, 0, 0, 16),
            (_JEQ, 2, 0, AF_INET),
            (_JEQ, 1, 0, AF_INET6),
            (_RET, 0, 0, _errno(EACCES)),
            (_RET, 0, 0, _ALLOW),
        ]
    else:
        prog += [(_JEQ, 0, 1, sys_socket), (_RET, 0, 0, _errno(EACCES))]
    prog += [(_RET, 0, 0, _ALLOW)]
    return prog
