"""The syscall filter: the kernel's escape hatches and legacy entry points refused, by
libseccomp's filter and by the hand-built one alike, and one filter inherited by every snippet."""

from __future__ import annotations

import os
import textwrap

import pytest
from support.sandboxes import still_works

from verifiers.sandbox import LocalSandboxProvider, SandboxLimits


async def test_kernel_escape_hatches_are_closed(sandbox):
    """ptrace, mount, unshare, new namespaces through clone, bpf: refused by name (and x32-ABI
    syscalls, a classic way around a filter, kill the snippet)."""
    import ctypes.util

    if os.uname().machine != "x86_64":
        pytest.skip("syscall numbers below are x86_64's")

    if ctypes.util.find_library("seccomp"):
        assert sandbox.seccomp == "libseccomp"  # the maintained library builds the filter
    await _escape_hatches_closed(sandbox)
    await still_works(sandbox)


async def _escape_hatches_closed(sandbox) -> None:
    code = textwrap.dedent("""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        def errno_of(result):
            return 0 if result == 0 else ctypes.get_errno()
        print(errno_of(libc.ptrace(0, 0, 0, 0)))              # PTRACE_TRACEME
        print(errno_of(libc.unshare(0x10000000)))             # CLONE_NEWUSER
        print(errno_of(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)))
        print(errno_of(libc.syscall(321, 0, 0, 0)))           # bpf (x86_64)
        print(errno_of(libc.syscall(56, 0x20000000 | 17, 0, 0, 0, 0)))  # clone(CLONE_NEWPID)
    """)
    result = await sandbox.run_python(code)
    assert [int(x) for x in result.stdout.split()] == [1, 1, 1, 1, 1], result
    x32 = await sandbox.run_python(
        "import ctypes; print(ctypes.CDLL(None).syscall(0x40000000 + 39))"  # x32 getpid
    )
    assert x32.stdout == "" and x32.exit_code != 0


async def test_legacy_syscalls_are_refused(sandbox):
    """modify_ldt (16-bit segments), personality flags (READ_IMPLIES_EXEC makes every mapping
    executable, ADDR_NO_RANDOMIZE turns ASLR off), uselib, pidfd_getfd: EPERM; asking for the
    current persona, or the default one, still works."""
    if os.uname().machine != "x86_64":
        pytest.skip("syscall numbers below are x86_64's")
    await _legacy_refused(sandbox)
    await still_works(sandbox)


async def _legacy_refused(sandbox) -> None:
    code = textwrap.dedent("""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        def call(*args):
            result = libc.syscall(*args)
            return "ok" if result >= 0 else ctypes.get_errno()
        buf = ctypes.create_string_buffer(16)
        print(call(154, 0, buf, 16))               # modify_ldt(read)
        print(call(135, 0x0400000))                # personality(READ_IMPLIES_EXEC)
        print(call(135, 0x0040000))                # personality(ADDR_NO_RANDOMIZE)
        print(call(135, ctypes.c_ulong(0x1_0040_0000)))  # the same, with upper bits set
        print(call(134, b"/lib/x"))                # uselib
        print(call(438, 0, 0, 0))                  # pidfd_getfd
        print(call(135, ctypes.c_ulong(0xFFFFFFFF)), call(135, 0))  # query, default persona
    """)
    result = await sandbox.run_python(code)
    assert result.stdout.split() == ["1", "1", "1", "1", "1", "1", "ok", "ok"], result


async def test_the_hand_built_filter_refuses_the_same(monkeypatch):
    """Without libseccomp the hand-assembled BPF program stands in: the same escapes, legacy
    calls and x32 syscalls are refused, and snippets still run."""
    if os.uname().machine != "x86_64":
        pytest.skip("syscall numbers in the probes are x86_64's")
    from verifiers.sandbox import seccomp

    monkeypatch.setattr(seccomp, "_libseccomp", lambda: None)
    seccomp.program.cache_clear()
    try:
        provider = LocalSandboxProvider(pool_size=0, limits=SandboxLimits(wall_time_s=5))
        box = await provider.create()
        try:
            assert box.seccomp == "bpf"
            await _escape_hatches_closed(box)
            await _legacy_refused(box)
            await still_works(box)
        finally:
            await provider.close()
    finally:
        seccomp.program.cache_clear()


async def test_every_snippet_inherits_the_workers_one_filter(sandbox):
    """The filter is loaded once, into the worker: a grader, a shell and the REPL each run under
    exactly that one filter (a process cannot drop it), and it still refuses what it refuses.
    (``/proc`` is out of reach in landlock mode: there the kernel's answer to PR_GET_SECCOMP.)"""
    status = (
        "import ctypes\n"
        "print('mode', ctypes.CDLL(None).prctl(21, 0, 0, 0, 0))\n"  # PR_GET_SECCOMP
        "try:\n"
        "    print(open('/proc/self/status').read())\n"
        "except PermissionError:\n"
        "    pass"
    )
    shell = "cat /proc/self/status 2>/dev/null || grep -c . /dev/null"
    results = [await sandbox.run_python(status), await sandbox.run_repl(status)]
    for result in results:
        assert "mode 2\n" in result.stdout, result
    results.append(await sandbox.run_shell(shell))
    if sandbox.mode == "bwrap":
        for result in results:
            assert "Seccomp:\t2" in result.stdout, result
            assert "Seccomp_filters:\t1" in result.stdout, result
    refused = await sandbox.run_python("import socket\nsocket.socket()")
    assert refused.exit_code != 0 and "Permission" in refused.stderr
