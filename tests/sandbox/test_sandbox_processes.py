"""Processes inside a sandbox: bounded, killed at their limits, swept before the next snippet
(whatever started them: a snippet, the REPL, a zombie), and never able to forge a later
grader's result; starts cancelled at any point leave nothing behind."""

from __future__ import annotations

import asyncio
import glob
import os
import tempfile
import textwrap
import time

import pytest
from support.sandboxes import (
    available_modes,
    named,
    sandbox_pids,
    still_works,
    wait_until_no_sandboxes,
)

from verifiers.sandbox import LocalSandboxProvider, SandboxLimits
from verifiers.sandbox.provider import probe_mode
from verifiers.sandbox.zygote import ZygoteProcess
from verifiers.testing.processes import descendants


async def test_fork_bomb_is_bounded(sandbox):
    before = set(sandbox_pids())  # this sandbox's worker: counting all of /proc would count
    # the processes that the tests beside this one start meanwhile
    result = await sandbox.run_python("import os\nwhile True:\n    os.fork()", timeout=2)
    assert result.timed_out or result.exit_code != 0
    await still_works(sandbox)
    assert set(sandbox_pids()) <= before  # everything it made is gone


async def test_a_started_worker_loads_without_the_ctypes_module(sandbox):
    """The worker makes its libc calls (the filter, its uid and process settings) through
    ``_ctypes`` itself: ``import ctypes`` was about 5 ms of every cold start's CPU. A snippet is
    a fork of the worker, so it sees what the worker imported; the filter is on all the same.
    A worker forked from the zygote has the zygote's modules, ``ctypes`` among them, imported
    once per host process."""
    forked = isinstance(sandbox.process, ZygoteProcess)
    seen = await sandbox.run_python(
        "import sys\nprint('ctypes' in sys.modules, '_ctypes' in sys.modules)"
    )
    assert seen.stdout.split() == [str(forked), "True"], seen
    refused = await sandbox.run_python("import socket\nsocket.socket()")
    assert refused.exit_code != 0 and "PermissionError" in refused.stderr, refused


async def test_spinning_forever_is_killed_at_the_time_limit(sandbox):
    # a wall limit under the fixture's 2 s CPU limit: CPU time never exceeds wall time, so the
    # wall clock always fires first (at 2 s both raced, and RLIMIT_CPU's kill reads as no
    # timeout): ``timed_out`` is the wall limit's kill. The minute bounds a hang, not its speed.
    result = await asyncio.wait_for(sandbox.run_python("while True:\n    pass", timeout=1), 60)
    assert result.timed_out
    await still_works(sandbox)


async def test_background_processes_are_swept(sandbox):
    result = await sandbox.run_python(
        "import subprocess, os\nsubprocess.Popen(['sleep', '300'])\nif os.fork() == 0:\n    import time; time.sleep(300)\nprint('started')"
    )
    assert result.stdout.strip().endswith("started") and result.swept >= 2
    check = await sandbox.run_shell("ps -e -o comm= 2>/dev/null | grep -c sleep || true")
    assert check.stdout.strip() in ("0", "")
    await still_works(sandbox)


async def test_leftovers_running_stopped_or_exited_are_swept_without_a_repl(sandbox):
    """With no REPL, the sweep after a snippet first asks the kernel whether the worker has any
    child at all (one ``waitid``, ``verifiers.sandbox.worker._childless``): an orphan still
    running, one that stopped itself and one that had exited (a zombie of the worker) are each
    a child, so each is found, killed or reaped, and nothing of them reaches the next snippet."""
    before = set(sandbox_pids())  # this sandbox's worker (and bubblewrap's init)
    leftovers = await sandbox.run_python(
        textwrap.dedent("""
            import os, signal, time
            def orphan(then):
                if os.fork() == 0:
                    if os.fork() == 0:
                        then()
                    os._exit(0)
            orphan(lambda: time.sleep(300))
            orphan(lambda: (os.kill(os.getpid(), signal.SIGSTOP), time.sleep(300)))
            orphan(lambda: os._exit(0))
            time.sleep(0.3)
            print("left")
        """)
    )
    assert leftovers.stdout == "left\n" and leftovers.swept >= 3, leftovers
    assert set(sandbox_pids()) <= before  # nothing of them is left, not even a zombie
    await still_works(sandbox)


CHILDLESS = textwrap.dedent("""
    import os, signal, sys, time
    sys.path.insert(0, sys.argv[1])
    from verifiers.sandbox.worker import _childless
    seen = [_childless()]
    pid = os.fork()
    if pid == 0:
        time.sleep(300)
    seen.append(_childless())  # running
    os.kill(pid, signal.SIGSTOP)
    os.waitpid(pid, os.WUNTRACED)
    seen.append(_childless())  # stopped, its stop already reported
    os.kill(pid, signal.SIGKILL)
    while not os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT):
        time.sleep(0.01)
    seen.append(_childless())  # a zombie, not reaped by the question
    seen.append(_childless())
    os.waitpid(pid, 0)
    seen.append(_childless())  # reaped
    import ctypes, platform
    number = {"x86_64": 56, "aarch64": 220}[platform.machine()]  # clone(2), no exit signal
    clone = ctypes.CDLL(None, use_errno=True).syscall(number, 0, 0, 0, 0, 0)
    if clone == 0:
        time.sleep(300)
    seen.append(_childless())  # a clone child, which plain waitid options do not see
    os.kill(clone, signal.SIGKILL)
    print(seen)
""")


def test_the_workers_childless_check_sees_every_child_and_reaps_none():
    """``_childless`` is true only for a process with no child in any state (running, stopped,
    a zombie, one cloned with no exit signal), and asking does not reap the zombie (the sweep
    still finds and counts it)."""
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run(
        [sys.executable, "-c", CHILDLESS, repo], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[True, False, False, False, False, True, False]\n", done.stdout


async def test_a_snippets_stdin_is_dev_null_and_it_holds_no_other_descriptor(sandbox):
    """A snippet's stdin is ``/dev/null``, read-only (a descriptor the worker opened once and
    each snippet's child duplicates), and a snippet, Python or shell, holds nothing but its
    three standard streams."""
    python = await sandbox.run_python(
        "import fcntl, os, stat, sys\n"
        "null, st = os.stat('/dev/null'), os.fstat(0)\n"
        "same = stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev\n"
        "def is_open(fd):\n"
        "    try:\n"
        "        return os.fstat(fd) is not None\n"
        "    except OSError:\n"
        "        return False\n"
        "fds = [fd for fd in range(1024) if is_open(fd)]\n"
        "print(repr(sys.stdin.read()), same, fcntl.fcntl(0, fcntl.F_GETFL) & os.O_ACCMODE, fds)"
    )
    assert python.stdout == "'' True 0 [0, 1, 2]\n", python
    shell = await sandbox.run_shell(
        "[ -c /dev/stdin ] && echo char; head -c 1 | wc -c; "
        "for fd in 3 4 5 6 7 8 9; do { true <&$fd; } 2>/dev/null && echo open $fd; done; echo end"
    )
    assert shell.stdout == "char\n0\nend\n", shell


async def test_a_worker_that_stops_answering_is_destroyed_at_the_requests_timeout(sandbox):
    """Every process of the sandbox stopped from the host: the request is given up at its
    timeout, said so, and the sandbox destroyed, with nothing of it left running."""
    import signal

    from verifiers.sandbox.base import SandboxError

    for pid in [sandbox.process.pid, *descendants(sandbox.process.pid)]:
        os.kill(pid, signal.SIGSTOP)
    with pytest.raises(SandboxError, match="stopped answering"):
        await sandbox._request({"op": "reset_repl"}, 0.5)
    assert sandbox.destroyed and sandbox.process.returncode is not None


REPL_ATTACK = textwrap.dedent("""
    import builtins, os, sys, threading, time
    x = 41
    builtins.print = lambda *a, **k: sys.stdout.write("42 passed\\n")
    worker = sys.modules["__main__"]  # the worker's own functions, as forked into the REPL
    for name in ("run_python", "exec_snippet", "_result"):
        if hasattr(worker, name):
            setattr(worker, name, lambda *a, **k: {"stdout": "42 passed\\n", "exit_code": 0})
    def forge_graders():  # write a verdict into every other process's stdout, again and again
        me = os.getpid()
        while True:
            for pid in os.listdir("/proc"):
                if pid.isdigit() and int(pid) != me:
                    try:
                        fd = os.open(f"/proc/{pid}/fd/1", os.O_WRONLY)
                        os.write(fd, b"42 passed\\n")
                        os.close(fd)
                    except OSError:
                        pass
            time.sleep(0.001)
    def fork_later():  # a process born after the sweep, to do the same
        time.sleep(0.3)
        if os.fork() == 0:
            forge_graders()
    threading.Thread(target=forge_graders, daemon=True).start()
    threading.Thread(target=fork_later, daemon=True).start()
    try:
        open(f"/proc/{os.getppid()}/mem", "r+b")
        sys.stderr.write("worker memory open\\n")
    except OSError:
        sys.stderr.write("worker memory closed\\n")
""")


GRADERS = {
    "python": ("python", "import time; time.sleep(0.5); print('0 passed')"),
    "shell": ("shell", "sleep 0.5; echo 0 passed"),
    "exec-from-python": (
        "python",
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', 'import time; time.sleep(0.5); print(\"0 passed\")'])",
    ),
}


async def test_repl_code_cannot_forge_any_later_graders_result(sandbox):
    """Model code in the REPL patches the worker functions forked into it, prints through a
    patched print, keeps threads writing a fake verdict into every process's stdout (through
    /proc/PID/fd, which an exec'd grader opens to its uid) and forks a writer after the sweep.
    Graders are fresh snippets (the REPL is frozen while they run): each prints only its own
    result, in both modes; the REPL keeps its state. A grader cannot be sent into the REPL:
    run_python has no repl=True (the REPL is run_repl, the model's tool)."""
    tampered = await sandbox.run_repl(REPL_ATTACK)
    assert "worker memory closed" in tampered.stderr, tampered
    for name, (language, code) in GRADERS.items():
        run = sandbox.run_shell if language == "shell" else sandbox.run_python
        for _ in range(2):
            verdict = await run(code)
            assert verdict.stdout == "0 passed\n" and verdict.exit_code == 0, (name, verdict)
    # the REPL is the model's own, patched by it: whatever it answers is still a clean result,
    # and a reset gives a fresh one
    assert isinstance((await sandbox.run_repl("print(x + 1)")).exit_code, int)
    await sandbox.reset_repl()
    assert (await sandbox.run_repl("x = 2\nprint(x)")).stdout == "2\n"
    with pytest.raises(TypeError):
        await sandbox.run_python("print('0 passed')", repl=True)


async def test_fork_hoppers_are_gone_before_the_next_snippet(sandbox):
    """A background process that keeps forking and letting its parent exit (so it is never the
    same pid twice) survives no sweep: six tries, none leaves a process behind."""
    hopper = textwrap.dedent("""
        import os, time
        if os.fork() == 0:
            os.setsid()
            while True:
                if os.fork():
                    os._exit(0)
                time.sleep(0.0005)
        print("started")
    """)
    if not sandbox.uid:
        pytest.skip("needs the sandbox's own uid to count its processes from the host")

    def running() -> int:  # host view: processes of the sandbox's uid
        total = 0
        for entry in os.listdir("/proc"):
            try:
                total += entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == sandbox.uid
            except OSError:
                pass
        return total

    baseline = running()  # the worker (and bwrap's init)
    for _ in range(6):
        started = await sandbox.run_python(hopper)
        assert started.stdout == "started\n"
        assert running() <= baseline, f"{running() - baseline} process(es) survived the sweep"
    await still_works(sandbox)


async def test_what_a_repl_starts_between_snippets_is_gone_before_a_grader(sandbox):
    """A REPL thread starts processes after its own snippet's sweep: a child of the REPL and an
    orphan (reparented to the worker). The grader's sweep finds both (it reads the frozen REPL's
    children, then the worker's) and the grader sees none of them; the REPL, whose children were
    killed, is restarted (and says so)."""
    await sandbox.run_repl(
        "import subprocess, threading\n"
        "def later():\n"
        "    subprocess.Popen(['sleep', '300'])\n"
        "    subprocess.run(['sh', '-c', 'sleep 301 &'])\n"
        "threading.Timer(0.3, later).start()\n"
        "kept = 7"
    )
    deadline = time.monotonic() + 60
    while len(named(descendants(sandbox.process.pid), "sleep")) < 2:  # both started
        assert time.monotonic() < deadline, "the REPL's thread started no processes"
        await asyncio.sleep(0.05)
    # (what was killed but is the frozen REPL's to reap stays a zombie until it runs again)
    grader = await sandbox.run_shell(
        "ps -e -o stat=,comm= 2>/dev/null | grep -v '^Z' | grep -c sleep || true"
    )
    assert grader.stdout.strip() == "0" and grader.swept >= 2, grader
    after = await sandbox.run_repl("print('kept' in globals())")
    assert after.stdout == "False\n" and "REPL was restarted" in after.stderr


async def test_zombies_a_repl_leaves_cannot_starve_a_grader(sandbox):
    """The REPL forks children it never reaps (zombies hold the sandbox's process budget) and
    keeps one running: the next fresh snippet still starts its own processes (the REPL, with
    what it left, is restarted first), the model is told with its next REPL reply, and the
    fresh REPL works."""
    await sandbox.run_repl(
        "import os, subprocess\n"
        "for _ in range(40):\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            os._exit(0)\n"
        "    except OSError:\n"
        "        break\n"
        "keep = subprocess.Popen(['sleep', '300'])\n"
        "state = 1"
    )
    grader = await sandbox.run_python(
        "import subprocess\n"
        "print(subprocess.run(['sh', '-c', 'echo 0 passed'], capture_output=True, text=True).stdout, end='')"
    )
    assert grader.stdout == "0 passed\n" and grader.exit_code == 0, grader
    shell = await sandbox.run_shell("echo $((6 * 7)); ps -e -o stat= | grep -c '^Z' || true")
    assert shell.stdout.split() == ["42", "0"], shell
    after = await sandbox.run_repl("print('state' in globals())")
    assert "REPL was restarted" in after.stderr and after.stdout == "False\n", after
    assert (await sandbox.run_repl("print(1)")).stderr == ""


async def test_nothing_the_model_writes_under_home_runs_in_a_later_python(sandbox):
    """The user site (usercustomize, .pth files under $HOME/.local) and a sitecustomize in the
    work dir run in no later snippet's python3; System V IPC, whose objects would outlive the
    sandbox in the host's IPC namespace (landlock mode), is refused there."""
    plant = (
        "site=$(python3 -c 'import site; print(site.getusersitepackages())') && mkdir -p $site && "
        "echo 'print(\"HIJACKED\")' > $site/usercustomize.py && "
        "echo 'import sys; print(\"HIJACKED\")' > $site/evil.pth && "
        "echo 'print(\"HIJACKED\")' > sitecustomize.py && echo planted"
    )
    assert (await sandbox.run_shell(plant)).stdout == "planted\n"
    for result in (
        await sandbox.run_shell("python3 -c 'print(6 * 7)'"),
        await sandbox.run_shell("cd /tmp && python3 -c 'print(6 * 7)'"),
        await sandbox.run_python("print(6 * 7)"),
    ):
        assert result.stdout == "42\n" and "HIJACKED" not in result.stderr, result
    shm = await sandbox.run_python(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "print(libc.shmget(0, 1 << 20, 0o1000 | 0o600), ctypes.get_errno())"
    )
    if sandbox.mode == "landlock":
        assert shm.stdout.split() == ["-1", "1"], shm  # EPERM
    else:  # its own IPC namespace, gone with the sandbox
        assert shm.stdout.split()[0] != "-1", shm


@pytest.mark.parametrize("mode", available_modes())
async def test_a_start_cancelled_at_any_point_leaves_nothing_running(mode):
    """A rollout cancelled while its sandbox boots (mid-spawn, mid-handshake, just after): no
    process, dir or budget of it survives, before the provider is even closed; a sandbox its
    creator dropped without destroying is still destroyed by the provider's close."""
    import gc

    provider = LocalSandboxProvider(mode=mode, pool_size=0, limits=SandboxLimits())
    for delay in (0, 0.002, 0.01, 0.03, 0.05, 0.08, 0.12):
        task = asyncio.ensure_future(provider.create())
        await asyncio.sleep(delay)
        task.cancel()
        done = (await asyncio.gather(task, return_exceptions=True))[0]
        if isinstance(done, BaseException):
            gc.collect()
            assert wait_until_no_sandboxes() == [], f"cancelled after {delay}s"
        else:
            await done.destroy()
    dropped = await provider.create()
    pid = dropped.process.pid
    del dropped
    gc.collect()
    await provider.close()
    assert wait_until_no_sandboxes() == []
    assert pid not in {int(p) for p in os.listdir("/proc") if p.isdigit()}
    assert not glob.glob(os.path.join(tempfile.gettempdir(), f"vf-sandbox-*-{os.getpid()}.*"))
    # a budget whose dying process still held it is removed by the next start
    await (await provider.create()).destroy()
    await provider.close()
    assert not glob.glob(f"/sys/fs/cgroup/*/vf-sandbox-{os.getpid()}-*") + glob.glob(
        f"/sys/fs/cgroup/vf-sandbox-{os.getpid()}-*"
    )


async def test_repl_keeps_state_and_recovers_from_timeouts(sandbox):
    assert (await sandbox.run_repl("x = 41")).exit_code == 0
    assert (await sandbox.run_repl("print(x + 1)")).stdout == "42\n"
    hung = await sandbox.run_repl("while True: pass", timeout=1)
    assert hung.timed_out and "state is lost" in hung.stderr
    assert "NameError" in (await sandbox.run_repl("print(x)")).stderr


def test_unsafe_mode_is_never_chosen_automatically():
    assert probe_mode() in ("bwrap", "landlock")
    with pytest.raises(ValueError, match="auto, bwrap, landlock or unsafe"):
        LocalSandboxProvider(mode="none")


@pytest.mark.skipif(os.getuid() != 0, reason="only root mounts a sandbox's own disk")
def test_a_stop_between_the_disk_mount_and_its_record_leaves_no_mount():
    """SIGTERM turned into ``SystemExit`` can land just after ``mount`` returned and before the
    sandbox noted its disk: the abandoned start still unmounts it and removes its directory (a
    benchmark stopped there left a tmpfs mounted in ``/tmp``, its directory unremovable)."""
    from verifiers.sandbox.budget import mount_disk
    from verifiers.sandbox.local import LocalSandbox

    box = LocalSandbox("rlimits", SandboxLimits())
    box._claim()
    assert box.host_dir is not None
    assert mount_disk(box.host_dir, 8, 100)
    assert os.path.ismount(box.host_dir) and box.disk == "rlimits"  # mounted, not yet noted
    box._abandon()
    assert not os.path.exists(box.host_dir)


STOPPED_MID_SPAWN = """
import asyncio, signal, sys
from asyncio import base_subprocess
from verifiers.sandbox import LocalSandboxProvider, SandboxLimits

connect = base_subprocess.BaseSubprocessTransport._connect_pipes

async def slow_pipes(self, waiter):  # the stop lands before the pipes are connected
    await asyncio.sleep(3600)
    await connect(self, waiter)

base_subprocess.BaseSubprocessTransport._connect_pipes = slow_pipes

async def main():
    provider = LocalSandboxProvider(mode=sys.argv[1], pool_size=0, limits=SandboxLimits())
    starts = [asyncio.ensure_future(provider.create()) for _ in range(4)]
    await asyncio.sleep(1.0)  # every spawn waits for its pipes now
    raise SystemExit(143)  # what a SIGTERM handler raises

asyncio.run(main())
"""


@pytest.mark.parametrize("mode", available_modes())
def test_a_program_stopped_while_sandboxes_spawn_ends_and_leaves_nothing(mode, tmp_path):
    """``asyncio.run`` stopped (SIGTERM's ``SystemExit``, Ctrl-C) while sandboxes spawn cancels
    the transports' pipe-connecting tasks too, and CPython's cancelled spawn then waits forever
    for an exit it is never told of: the program still ends, without a sandbox dir or disk left
    (a stopped benchmark hung 45 s, then left 8 tmpfs mounts in ``/tmp``)."""
    import subprocess
    import sys

    script = tmp_path / "stopped.py"
    script.write_text(STOPPED_MID_SPAWN)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(script), mode], env=env, capture_output=True, timeout=60
    )
    assert done.returncode == 143, done.stderr.decode()[-2000:]
    assert time.monotonic() - started < 30
    assert list(scratch.iterdir()) == []
    assert [line for line in open("/proc/mounts") if str(scratch) in line] == []
