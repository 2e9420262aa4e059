"""What a sandbox can reach: no host files, no network, no host processes or sockets, budgets
of memory and disk for the sandbox as a whole, uids no one else holds; as root and not."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest
from support.sandboxes import available_modes, named, still_works, wait_until_no_sandboxes

from verifiers.sandbox import LocalSandboxProvider, SandboxError, SandboxLimits
from verifiers.sandbox.base import SandboxUnavailableError


async def test_reading_a_secret_outside_the_work_dir_fails(sandbox, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    for target in (str(secret), "/etc/shadow", "/root/.bash_history", "/proc/1/environ"):
        result = await sandbox.run_python(f"print(open({target!r}).read())")
        assert "hunter2" not in result.stdout and result.exit_code != 0, target
    await still_works(sandbox)


async def test_writing_outside_the_work_dir_fails(sandbox, tmp_path):
    target = tmp_path / "pwned.txt"
    for path in (str(target), "/usr/pwned", "/etc/pwned"):
        result = await sandbox.run_python(f"open({path!r}, 'w').write('x')")
        assert result.exit_code != 0, path
    assert not target.exists()
    assert (
        await sandbox.run_python(
            "open('mine.txt', 'w').write('ok'); print(open('mine.txt').read())"
        )
    ).stdout == "ok\n"
    await still_works(sandbox)


async def test_tcp_to_a_host_server_fails(sandbox):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    accepted = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\nprint('connected')"
    result = await sandbox.run_python(code)
    assert "connected" not in result.stdout and result.exit_code != 0
    assert accepted == []
    listener.close()
    await still_works(sandbox)


async def test_the_sandbox_sees_the_interpreter_and_nothing_else_of_the_host(sandbox, tmp_path):
    """Not the parent's cwd (the project, its .git), not $HOME, not host /tmp, not the virtualenv
    or the packages installed in it (other environments' answers); only the standard library."""
    import uuid

    home_secret = Path.home() / f".vf-secret-{uuid.uuid4().hex}"
    tmp_secret = Path("/tmp") / f"vf-secret-{uuid.uuid4().hex}"
    for secret in (home_secret, tmp_secret):
        secret.write_text("do not read")
        secret.chmod(0o644)  # even world-readable files of the host stay out of reach
    try:
        probe = textwrap.dedent(f"""
            import sys, os, json
            found = {{}}
            for path in {[str(home_secret), str(tmp_secret), str(Path.cwd() / "pyproject.toml"), str(Path.cwd() / ".git" / "HEAD"), sys.prefix + "/pyvenv.cfg"]!r}:
                try:
                    found[path] = open(path).read()[:10]
                except OSError as exc:
                    found[path] = None
            modules = {{}}
            for name in ("verifiers", "reverse_text", "pytest", "torch", "json"):
                try:
                    __import__(name)
                    modules[name] = True
                except ImportError:
                    modules[name] = False
            print(json.dumps({{"found": found, "modules": modules, "path": sys.path}}))
        """)
        result = await sandbox.run_python(probe)
        seen = json.loads(result.stdout)
        assert all(v is None for v in seen["found"].values()), seen["found"]
        assert seen["modules"] == {
            "verifiers": False,
            "reverse_text": False,
            "pytest": False,
            "torch": False,
            "json": True,
        }
        host_project = str(Path.cwd())
        assert not any(p.startswith(host_project) or ".venv" in p for p in seen["path"]), seen[
            "path"
        ]
    finally:
        home_secret.unlink()
        tmp_secret.unlink()
    await still_works(sandbox)


async def test_host_paths_do_not_leak_through_proc(sandbox):
    """Not through any process's argv, the environment or the mount table: neither the project
    (the parent's cwd) nor the sandbox's host directory appears."""
    code = textwrap.dedent("""
        import os
        seen = []
        for name in ["self/mountinfo", "self/environ"] + [
            f"{p}/cmdline" for p in os.listdir("/proc") if p.isdigit()
        ]:
            try:
                seen.append(open("/proc/" + name, "rb").read().decode("utf-8", "replace"))
            except OSError:
                pass
        print(len(seen))
        print("\\n".join(seen))
    """)
    result = await sandbox.run_python(code)
    if sandbox.mode == "landlock":  # /proc is not granted at all in landlock mode
        assert "PermissionError" in result.stderr, result
        return
    text = result.stdout
    assert int(text.splitlines()[0]) >= 3
    for secret in (str(Path.cwd()), str(sandbox.host_dir)):
        assert secret not in text, secret
    await still_works(sandbox)


async def test_packages_allowed_for_the_sandbox_import_and_no_others():
    provider = LocalSandboxProvider(pool_size=0, limits=SandboxLimits(packages=["mpmath"]))
    box = await provider.create()
    try:
        ok = await box.run_python("import mpmath; print(mpmath.mpf(2) ** 2)")
        assert ok.stdout.strip() == "4.0", ok.stderr
        other = await box.run_python("import sympy")
        assert other.exit_code != 0
    finally:
        await provider.close()


@pytest.mark.skipif(
    __import__("verifiers.sandbox.budget", fromlist=["x"]).available_kind() == "rlimits",
    reason="no writable cgroup hierarchy here: budgets are per-process rlimits",
)
async def test_memory_is_budgeted_per_sandbox_not_per_process():
    """Six children of 400 MiB each pass a 512 MiB per-process limit; the sandbox's cgroup
    holds all of them to 512 MiB together."""
    provider = LocalSandboxProvider(
        pool_size=0, limits=SandboxLimits(memory_mb=512, wall_time_s=20, cpu_time_s=20)
    )
    box = await provider.create()
    try:
        code = textwrap.dedent("""
            import os, time
            pids = []
            for _ in range(6):
                pid = os.fork()
                if pid == 0:
                    block = bytearray(400 * 1024 * 1024)
                    for i in range(0, len(block), 4096):
                        block[i] = 1
                    time.sleep(3)
                    os._exit(0)
                pids.append(pid)
            alive = sum(os.waitpid(p, 0)[1] == 0 for p in pids)
            print(alive)
        """)
        result = await box.run_python(code)
        survivors = int(result.stdout.strip() or 0)
        assert survivors <= 1, result
    finally:
        await provider.close()
    assert wait_until_no_sandboxes() == []


@pytest.mark.skipif(
    __import__("verifiers.sandbox.budget", fromlist=["x"]).available_kind() == "rlimits",
    reason="no writable cgroup hierarchy here: budgets are per-process rlimits",
)
async def test_every_process_of_a_sandbox_is_in_its_budget(sandbox):
    """The sandbox's processes join its cgroups once its interpreter has started, before any of
    them forks or runs the model's code: bubblewrap's, the worker and what a snippet starts are
    all inside, in every group (memory, pids, cpu)."""
    from verifiers.testing.processes import descendants

    running = asyncio.ensure_future(sandbox.run_shell("sleep 3 & sleep 3 & wait", timeout=10))
    try:
        for _ in range(200):
            tree = {sandbox.process.pid, *descendants(sandbox.process.pid)}
            sleeping = named(tree, "sleep")
            if len(sleeping) == 2:
                break
            await asyncio.sleep(0.02)
        assert len(sleeping) == 2, tree
        assert sandbox.budget.groups
        for group in sandbox.budget.groups:
            inside = {int(p) for p in (group / "cgroup.procs").read_text().split()}
            assert tree <= inside, (group, tree - inside)
    finally:
        await running


async def test_disk_is_budgeted_per_sandbox(sandbox):
    """300 MiB, or 30,000 files, never reach the host disk: the sandbox's work dir and /tmp are
    its own small filesystems, or /tmp takes nothing (as root; elsewhere only the per-file limit
    holds). Sizes are read inside the sandbox: the host disk's usage moves with whatever else
    runs beside the test."""
    if sandbox.disk != "tmpfs":
        pytest.skip("not root: no tmpfs can be mounted; the per-file size limit holds")
    code = textwrap.dedent("""
        import os
        sizes = [os.statvfs(p).f_blocks * os.statvfs(p).f_frsize >> 20 for p in (".", "/tmp")]
        print("filesystems of", *sizes, "MiB")
        written = 0
        try:
            for i in range(10):
                with open(f"big{i}.bin", "wb") as f:
                    f.write(b"x" * (30 * 1024 * 1024))
                written += 30
        except OSError as exc:
            print("stopped at", written, type(exc).__name__)
        made = 0
        try:
            for i in range(30000):
                open(f"/tmp/f{i}", "w").close()
                made += 1
        except OSError:
            pass
        print("files", made)
    """)
    limited = SandboxLimits(
        disk_mb=64, max_files=1000, wall_time_s=20, cpu_time_s=20, memory_mb=512
    )
    provider = LocalSandboxProvider(mode=sandbox.mode, pool_size=0, limits=limited)
    box = await provider.create()
    try:
        result = await box.run_python(code)
        work, tmp = (int(size) for size in result.stdout.split("filesystems of")[1].split()[:2])
        made = int(result.stdout.split("files")[-1])
        assert 0 < work <= 64, result  # the work dir is not the host's disk
        assert 0 < tmp <= 64 or made == 0, result  # nor is /tmp, or nothing can be written there
        assert int(result.stdout.split("stopped at")[1].split()[0]) <= 64, result
        assert made < 1000
    finally:
        await provider.close()
    await still_works(sandbox)


async def test_host_unix_sockets_are_unreachable(sandbox):
    """tmux, docker, dbus, ssh-agent: a unix socket of the host, abstract or on a path the sandbox
    can see, never answers; asyncio (socketpair) still works inside."""
    import uuid

    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0vf-ipc-{uuid.uuid4().hex}")
    abstract.listen(1)
    on_disk = socket.socket(socket.AF_UNIX)
    path = sandbox.workdir_host / "host.sock"
    on_disk.bind(str(path))
    on_disk.listen(1)
    os.chmod(path, 0o777)
    inside = "/workspace/host.sock" if sandbox.mode == "bwrap" else str(path)
    for address in (abstract.getsockname(), inside):
        code = textwrap.dedent(f"""
            import socket
            s = socket.socket(socket.AF_UNIX)
            s.connect({address!r})
            print("connected")
        """)
        result = await sandbox.run_python(code)
        assert "connected" not in result.stdout and "PermissionError" in result.stderr, address
    result = await sandbox.run_python("import asyncio; asyncio.run(asyncio.sleep(0)); print('ok')")
    assert result.stdout == "ok\n"
    abstract.close()
    on_disk.close()
    await still_works(sandbox)


def _outside_address() -> str | None:
    """This host's address on its network (not loopback), if it has one: a UDP connect sends
    nothing, it only picks the route."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # TEST-NET-1: never answered, only routed
        address = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


def _listener(host: str) -> tuple[socket.socket, int, list]:
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.bind((host, 0))
    listener.listen(4)
    accepted: list = []

    def accept() -> None:
        while True:
            try:
                accepted.append(listener.accept())
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return listener, listener.getsockname()[1], accepted


async def test_network_true_reaches_the_network_but_not_the_hosts_loopback():
    """A hub, a model server, PostgreSQL: what this host keeps on 127.0.0.1 (or ::1) stays out
    of reach of network=True; the sandbox's own loopback and the network beyond it work, and
    host IPC stays closed. Landlock mode (no network namespace) refuses network=True."""
    if "bwrap" not in [m if isinstance(m, str) else None for m in available_modes()]:
        pytest.skip("network=True needs bubblewrap")
    if shutil.which("slirp4netns") is None:
        pytest.skip("network=True needs slirp4netns (apt-get install slirp4netns; setup.sh does)")
    provider = LocalSandboxProvider(
        mode="bwrap", pool_size=0, limits=SandboxLimits(network=True, wall_time_s=5)
    )
    box = await provider.create()
    listeners = []
    try:
        for host in ("127.0.0.1", "::1"):
            try:
                listener, port, accepted = _listener(host)
            except OSError:
                continue  # no IPv6 loopback here
            listeners.append(listener)
            reach = await box.run_python(
                f"import socket; socket.create_connection(({host!r}, {port}), timeout=2); print('reached')"
            )
            assert "reached" not in reach.stdout and reach.exit_code != 0, (host, reach)
            assert accepted == [], host
        inside = await box.run_python(
            textwrap.dedent("""
                import socket, threading
                server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(1)
                threading.Thread(target=server.accept, daemon=True).start()
                socket.create_connection(server.getsockname(), timeout=2); print("own loopback")
            """)
        )
        assert inside.stdout == "own loopback\n", inside
        outside = _outside_address()
        if outside is not None:
            listener, port, accepted = _listener(outside)
            listeners.append(listener)
            out = await box.run_python(
                f"import socket; socket.create_connection(({outside!r}, {port}), timeout=2); print('out')"
            )
            assert out.stdout == "out\n", out.stderr
        unix = await box.run_python("import socket; socket.socket(socket.AF_UNIX)")
        assert "PermissionError" in unix.stderr
        await still_works(box)
    finally:
        for listener in listeners:
            listener.close()
        await provider.close()
    from verifiers.sandbox.local import LocalSandbox

    with pytest.raises(SandboxUnavailableError, match="landlock mode"):
        LocalSandbox("landlock", SandboxLimits(network=True))


def test_sandbox_uids_never_collide_across_processes(tmp_path):
    """Two processes claiming sandbox uids at once get different ones (and a dead holder's uid
    is free again)."""
    script = textwrap.dedent(f"""
        import os, sys, time
        os.environ["VF_SANDBOX_UID_DIR"] = {str(tmp_path)!r}
        from verifiers.sandbox.uids import UidClaim
        claims = [UidClaim() for _ in range(20)]
        print(" ".join(str(c.uid) for c in claims), flush=True)
        time.sleep(2)
    """)
    env = {**os.environ, "VF_SANDBOX_UID_DIR": str(tmp_path)}
    procs = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    seen = [set(p.stdout.readline().split()) for p in procs]
    for p in procs:
        p.wait()
    assert len(seen[0]) == len(seen[1]) == 20 and not seen[0] & seen[1]


def test_a_released_sandbox_uid_leaves_no_lock_file_and_a_stale_opener_holds_no_claim(
    tmp_path, monkeypatch
):
    """Every claim left its lock file behind (~25,000 in /run/verifiers-sandbox-uids): a claim
    released removes it. A process that opened the file before its holder removed it then
    locks a file no one else can see: that is no claim (the name is checked), and the uid is
    claimed anew through a new file."""
    import fcntl

    from verifiers.sandbox import uids

    monkeypatch.setattr(uids, "UID_LOCK_DIR", tmp_path)
    claims = [uids.UidClaim() for _ in range(5)]
    assert sorted(os.listdir(tmp_path)) == sorted(str(claim.uid) for claim in claims)
    name = tmp_path / str(claims[0].uid)
    stale = os.open(name, os.O_RDWR)  # opened before its holder lets go
    try:
        assert uids.still_named(stale, name)
        for claim in claims:
            claim.release()
        assert os.listdir(tmp_path) == []
        fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the removed file's lock is free
        assert not uids.still_named(stale, name)
        again = uids.UidClaim()
        assert os.listdir(tmp_path) == [str(again.uid)]
        again.release()
        assert os.listdir(tmp_path) == []
    finally:
        os.close(stale)


def test_stale_uid_lock_files_are_swept_and_held_or_others_files_stay(tmp_path, monkeypatch):
    """A claim's holder that died, or released before releases removed files, left its lock file
    behind until its uid was claimed and released again. A process's first claim sweeps them,
    each as a release removes it (locked, still the file at its name: one opened before it went
    holds no claim); a file another process holds, another user's (uid 65534's, in a sticky
    directory), a link or a name that is no sandbox uid stays. Only the first claim sweeps."""
    import tempfile

    from verifiers.sandbox import uids

    locks = Path(tempfile.mkdtemp(prefix="vf-uid-locks-"))  # tmp_path is under a 0700 dir
    locks.chmod(0o1777)  # as /tmp: another user may make files here, not remove ours
    monkeypatch.setattr(uids, "UID_LOCK_DIR", locks)
    monkeypatch.setattr(uids, "_swept", set())
    base = uids.UID_BASE
    for uid in (base + 1, base + 2):
        (locks / str(uid)).touch()
    victim = tmp_path / "victim"
    victim.write_text("kept")
    (locks / str(base + 5)).symlink_to(victim)
    (locks / "notes").touch()
    (locks / "123").touch()
    held_path = locks / str(base + 3)
    held_path.touch()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); "
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
            str(held_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    others = locks / str(base + 4)
    if os.geteuid() == 0 and shutil.which("setpriv"):  # CI is root: uid 65534 makes it
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        subprocess.run([*nobody, "touch", str(others)], check=True)
        assert others.stat().st_uid == 65534
    stale = os.open(locks / str(base + 1), os.O_RDWR)  # opened before the sweep
    try:
        assert holder.stdout.readline().strip() == "held"
        claim = uids.UidClaim()
        left = set(os.listdir(locks)) - {str(claim.uid)}
        kept = {str(base + 3), str(base + 5), "notes", "123"}
        if others.exists():
            kept.add(str(base + 4))
        assert left == kept, left
        assert victim.read_text() == "kept" and (locks / str(base + 5)).is_symlink()
        fcntl.flock(stale, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its lock is free: no claim
        assert not uids.still_named(stale, locks / str(base + 1))
        (locks / str(base + 6)).touch()  # left after this process swept: the next claim keeps it
        again = uids.UidClaim()
        assert (locks / str(base + 6)).exists()
        again.release()
        claim.release()
        assert not (locks / str(claim.uid)).exists()
        holder.kill()
        holder.wait()
        assert uids.sweep_stale(locks) == 2  # the file the holder no longer holds, and base + 6
        assert (locks / str(base + 4)).exists() == others.exists()
    finally:
        os.close(stale)
        holder.kill()
        holder.wait()
        shutil.rmtree(locks, ignore_errors=True)


def test_a_lock_file_another_user_planted_never_gives_two_sandboxes_one_uid(monkeypatch):
    """In a shared sticky lock directory another user (uid 65534) made a file at the name a
    claim would take: the claim locked that file, its owner removed it while the sandbox held
    the uid, and the next claim took the same uid through a new file (two sandboxes, one uid:
    each could read and signal the other's processes). A file that is not this user's is now a
    uid in use, a link or a directory at the name too, and a lock directory another user owns,
    or anyone may change without the sticky bit, is refused; claims in the user's own sticky
    directory still work and never collide."""
    import random

    from verifiers.sandbox import uids

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("another local user (uid 65534) needs root and setpriv")
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    locks = Path(tempfile.mkdtemp(prefix="vf-uid-locks-"))
    locks.chmod(0o1777)  # as /tmp: another user may make files here, not remove ours
    monkeypatch.setattr(uids, "UID_LOCK_DIR", locks)
    monkeypatch.setattr(uids, "_swept", set())
    state = random.getstate()
    try:
        random.seed(7)
        first = uids.UID_BASE + random.randrange(uids.UID_COUNT)  # where the next claim starts
        planted = locks / str(first)
        subprocess.run([*nobody, "touch", str(planted)], check=True)
        (locks / str(first + 1)).symlink_to("/etc/passwd")
        (locks / str(first + 2)).mkdir()
        random.seed(7)
        a = uids.UidClaim()
        subprocess.run([*nobody, "rm", "-f", str(planted)], check=True)  # its owner may
        random.seed(7)
        b = uids.UidClaim()
        assert a.uid != b.uid
        assert a.uid not in (first, first + 1, first + 2)
        assert (locks / str(a.uid)).stat().st_uid == 0
        a.release()
        b.release()
    finally:
        random.setstate(state)
    theirs = Path(tempfile.mkdtemp(prefix="vf-uid-theirs-"))
    theirs.chmod(0o755)
    os.chown(theirs, 65534, 65534)
    open_to_all = Path(tempfile.mkdtemp(prefix="vf-uid-open-"))
    open_to_all.chmod(0o777)
    try:
        for bad in (theirs, open_to_all):
            monkeypatch.setattr(uids, "UID_LOCK_DIR", bad)
            with pytest.raises(SandboxUnavailableError, match="sandbox uid locks"):
                uids.UidClaim()
            assert os.listdir(bad) == []
    finally:
        for made in (locks, theirs, open_to_all):
            shutil.rmtree(made, ignore_errors=True)


async def test_host_processes_are_invisible_and_unsignalable(sandbox):
    host_pid = os.getpid()
    result = await sandbox.run_python(
        textwrap.dedent(f"""
        import os, signal
        try:
            pids = [p for p in os.listdir('/proc') if p.isdigit()]
        except OSError as e:
            pids = []
        print('sees host', str({host_pid}) in pids)
        try:
            os.kill({host_pid}, signal.SIGTERM)
            print('signalled')
        except OSError as e:
            print('kill failed', type(e).__name__)
    """)
    )
    assert (
        "sees host False" in result.stdout
        and "kill failed" in result.stdout
        and "signalled" not in result.stdout
    )
    await still_works(sandbox)


async def test_allocating_4_gib_under_512_mib_fails(sandbox):
    result = await sandbox.run_python("x = bytearray(4 * 1024**3)\nprint('allocated')")
    assert "allocated" not in result.stdout and "MemoryError" in result.stderr
    await still_works(sandbox)


async def test_files_up_and_down_stay_inside(sandbox):
    await sandbox.upload("data/in.txt", b"hello")
    assert (await sandbox.run_shell("cat data/in.txt")).stdout == "hello"
    assert await sandbox.download("data/in.txt") == b"hello"
    with pytest.raises(SandboxError, match="not a path inside the sandbox work directory"):
        await sandbox.download("../../../etc/passwd")
    await sandbox.run_shell("ln -s /etc/hostname link")
    with pytest.raises(SandboxError):
        await sandbox.download("link")


async def test_only_regular_files_are_transferred_and_anything_else_is_refused_at_once(sandbox):
    """A download of a FIFO in the sandbox waited for a writer until its request timed out (~30
    s, and the sandbox was destroyed): a FIFO, a directory, a link out of the sandbox and a
    device node are each refused with an error naming what the path is, both ways, and the
    sandbox goes on answering."""
    await sandbox.run_shell("mkfifo fifo && mkdir dir && ln -s /etc/hostname link")
    for path, kind in (("fifo", "FIFO"), ("dir", "directory"), ("link", "symbolic link")):
        with pytest.raises(SandboxError, match=kind):
            await sandbox.download(path)
        with pytest.raises(SandboxError, match=kind):
            await sandbox.upload(path, b"planted")
    if os.geteuid() == 0:  # a device node only root makes: refused (or, on a nodev disk, denied)
        os.mknod(sandbox.workdir_host / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        with pytest.raises(SandboxError, match=r"character device|Permission denied"):
            await sandbox.download("null")
    await sandbox.upload("plain.txt", b"a file")
    assert await sandbox.download("plain.txt") == b"a file"
    await still_works(sandbox)


async def test_world_writable_host_files_cannot_be_truncated_or_written(sandbox):
    import shutil
    import uuid

    directory = Path("/tmp") / f"vf-trunc-{uuid.uuid4().hex}"
    directory.mkdir()
    victim = directory / "shared.log"
    victim.write_text("precious")
    os.chmod(directory, 0o777)
    os.chmod(victim, 0o666)
    try:
        code = textwrap.dedent(f"""
            import os
            for attempt in (lambda: os.truncate({str(victim)!r}, 0),
                            lambda: open({str(victim)!r}, "a").write("x")):
                try:
                    attempt()
                    print("changed")
                except OSError:
                    print("refused")
        """)
        result = await sandbox.run_python(code)
        assert result.stdout == "refused\nrefused\n", result
        assert victim.read_text() == "precious"
    finally:
        shutil.rmtree(directory)
    await still_works(sandbox)


async def test_file_transfer_cannot_be_raced_onto_host_files(sandbox, tmp_path):
    """Sandboxed code flips a directory between a real one and a link to a host directory while
    the host uploads and downloads through it: no transfer ever touches the host file."""
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    (host_dir / "f.txt").write_text("HOST SECRET")
    os.chmod(host_dir, 0o777)
    os.chmod(host_dir / "f.txt", 0o666)
    target = "/etc" if sandbox.mode == "bwrap" else str(host_dir)  # what the sandbox can name
    flipper = textwrap.dedent(f"""
        import os, shutil, threading, time
        os.makedirs("d", exist_ok=True)
        open("d/f.txt", "w").write("mine")
        def put_back():
            if os.path.islink("d"):
                os.unlink("d")
            if os.path.isdir("real"):
                shutil.rmtree("d", ignore_errors=True)
                os.rename("real", "d")
        def flip():
            end = time.time() + 120
            while time.time() < end and not os.path.exists("stop"):
                try:
                    os.rename("d", "real")
                    os.symlink({target!r}, "d")
                    time.sleep(0.0005)
                    os.unlink("d")
                    os.rename("real", "d")
                    time.sleep(0.0005)
                except OSError:  # an upload recreated "d" mid-flip: put it back, keep flipping
                    try:
                        put_back()
                    except OSError:
                        pass
        threading.Thread(target=flip, daemon=True).start()  # the REPL keeps it running
        print("flipping")
    """)
    started = await sandbox.run_repl(flipper)
    assert started.stdout == "flipping\n", started
    leaked, errors, successes = 0, 0, 0
    for attempt in range(3000):  # until both outcomes were seen often, so the race surely ran
        if attempt >= 200 and min(errors, successes) >= 10:
            break
        for transfer in (sandbox.download("d/f.txt"), sandbox.upload("d/f.txt", b"planted")):
            try:
                data = await transfer
                leaked += data == b"HOST SECRET"
                successes += 1
            except SandboxError:
                errors += 1
    await sandbox.upload("stop", b"")
    assert leaked == 0 and (host_dir / "f.txt").read_text() == "HOST SECRET"
    assert errors >= 10 and successes >= 10, (errors, successes)  # transfers met link and directory


async def test_the_disk_budget_holds_for_the_sandbox_not_per_directory(sandbox):
    """40 MiB in the work dir and 40 MiB in /tmp under disk_mb=64: the second write fails,
    the host disk never sees either, and the sandbox goes on."""
    if sandbox.disk != "tmpfs":
        pytest.skip("not root: no tmpfs can be mounted; the per-file size limit holds")
    limited = SandboxLimits(disk_mb=64, max_files=1000, wall_time_s=20, cpu_time_s=20)
    provider = LocalSandboxProvider(mode=sandbox.mode, pool_size=0, limits=limited)
    box = await provider.create()
    try:
        code = textwrap.dedent("""
            def fill(path):
                try:
                    with open(path, "wb") as f:
                        for _ in range(40):
                            f.write(b"x" * (1 << 20))
                    return "ok"
                except OSError as exc:
                    return type(exc).__name__
            import os
            print(fill("work.bin"), fill(os.path.join(os.environ["TMPDIR"], "tmp.bin")))
        """)
        result = await box.run_python(code)
        assert result.stdout.split() == ["ok", "OSError"], result
        assert (await box.run_python("import os; os.remove('work.bin'); print(1)")).stdout == "1\n"
        again = await box.run_python(
            "import os; open(os.environ['TMPDIR'] + '/b.bin', 'wb').write(b'x' * (20 << 20)); print(2)"
        )
        assert again.stdout == "2\n", again  # freed space is the sandbox's again
    finally:
        await provider.close()


def test_sandbox_uids_are_nobodys_and_outside_every_subordinate_range(tmp_path, monkeypatch):
    """Subordinate ranges (/etc/subuid, /etc/subgid, and what useradd would hand out, 100000
    to 600100000 by default) are some user's container root: no sandbox uid falls there, nor
    on an existing user or group; a uid the host lists is skipped."""
    from verifiers.sandbox import uids

    base = uids.UID_BASE
    subuid = tmp_path / "subuid"
    subuid.write_text(f"alice:{base}:{uids.UID_COUNT - 3}\n")  # all but the last three
    monkeypatch.setattr(uids, "SUBORDINATE_FILES", (str(subuid),))
    monkeypatch.setattr(uids, "UID_LOCK_DIR", tmp_path / "locks")
    uids.taken_ranges.cache_clear()
    try:
        claims = [uids.UidClaim() for _ in range(3)]
        got = sorted(c.uid for c in claims)
        assert got == [base + uids.UID_COUNT - 3 + i for i in range(3)]
        with pytest.raises(SandboxUnavailableError, match="in use or belong"):
            uids.UidClaim()
        for claim in claims:
            claim.release()
    finally:  # the host's own ranges again, before anything claims (and caches) with them
        monkeypatch.undo()
        uids.taken_ranges.cache_clear()
    claim = uids.UidClaim()
    try:
        low, high = 100_000, 600_100_000
        assert not low <= claim.uid <= high and uids.is_free(claim.uid)
        import pwd

        assert claim.uid not in {p.pw_uid for p in pwd.getpwall()}
    finally:
        claim.release()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as a second local user")
async def test_another_local_user_cannot_read_a_sandboxs_files(sandbox):
    """What the sandbox writes (a solution, a key it was given) is its own: another local
    user (nobody) can neither list its work dir or /tmp nor read a file in them."""
    await sandbox.upload("secret.txt", b"the model's answer")
    await sandbox.run_python("import os; open(os.environ['TMPDIR'] + '/t.txt', 'w').write('x')")
    probe = textwrap.dedent(f"""
        import os, json
        out = {{}}
        for path in ({str(sandbox.workdir_host)!r}, {str(sandbox.tmp_host)!r}):
            try:
                out[path] = os.listdir(path)
            except OSError as exc:
                out[path] = type(exc).__name__
        try:
            out["file"] = open({str(sandbox.workdir_host / "secret.txt")!r}).read()
        except OSError as exc:
            out["file"] = type(exc).__name__
        print(json.dumps(out))
    """)
    import pwd

    nobody = pwd.getpwnam("nobody")
    seen = await asyncio.to_thread(
        subprocess.run,
        ["/usr/bin/python3", "-I", "-S", "-c", probe],
        capture_output=True,
        text=True,
        user=nobody.pw_uid,
        group=nobody.pw_gid,
        extra_groups=[],
        cwd="/",
    )
    outcome = json.loads(seen.stdout)
    assert all(v == "PermissionError" for v in outcome.values()), seen.stdout + seen.stderr
    assert await sandbox.download("secret.txt") == b"the model's answer"


def test_landlock_runs_an_interpreter_the_sandbox_uid_can_reach(monkeypatch):
    """As root without namespaces, code must run as another uid, which cannot enter a private
    Python install (pyenv under /root, 0700): a reachable system Python of the same version is
    used instead, or VF_SANDBOX_PYTHON; the worker's code comes on its stdin, so no file of this
    checkout needs to be readable for that uid."""
    from verifiers.sandbox.view import _reachable, sandbox_python

    sandbox_python.cache_clear()
    try:
        chosen = sandbox_python("landlock")
        if os.getuid() == 0:
            assert _reachable(chosen.paths), chosen.paths
        # the real interpreter, never a virtualenv's wrapper (the venv itself stays out of view)
        assert sandbox_python("bwrap").executable == os.path.realpath(sys.executable)
        monkeypatch.setenv("VF_SANDBOX_PYTHON", sys.executable)
        sandbox_python.cache_clear()
        assert sandbox_python("landlock").executable == os.path.realpath(sys.executable)
    finally:
        sandbox_python.cache_clear()


NON_ROOT_PROBE = textwrap.dedent("""
    import asyncio, json, os, sys
    from verifiers.sandbox import LocalSandboxProvider, SandboxLimits
    from verifiers.sandbox.local import SandboxUnavailableError

    home = sys.argv[2]  # runuser resets HOME; the test hands the user's home over
    secret = os.path.join(home, "id_ed25519")
    with open(secret, "w") as f:
        f.write("PRIVATE KEY")
    os.chmod(secret, 0o600)

    async def main():
        try:
            provider = LocalSandboxProvider(mode=sys.argv[1], pool_size=0, limits=SandboxLimits())
            box = await provider.create()
        except SandboxUnavailableError as exc:
            return {"refused": str(exc)}
        try:
            probe = (
                "import os, json\\n"
                "out = {'uid': os.getuid()}\\n"
                f"for path in ({secret!r}, {home!r}):\\n"
                "    try:\\n"
                "        out[path] = open(path).read() if os.path.isfile(path) else os.listdir(path)\\n"
                "    except OSError as exc:\\n"
                "        out[path] = type(exc).__name__\\n"
                "print(json.dumps(out))\\n"
            )
            result = await box.run_python(probe)
            return {"mode": box.mode, "inside": json.loads(result.stdout), "stderr": result.stderr}
        finally:
            await provider.close()

    print("RESULT " + json.dumps(asyncio.run(main())))
""")


def _readable_copy_of_the_sandbox(lib: Path) -> Path:
    """Copy verifiers and what ``verifiers.sandbox`` imports into ``lib``: a checkout or a venv
    under a 0700 directory (``mktemp -d``) is out of the unprivileged user's reach."""
    listing = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, verifiers.sandbox.local\n"
            "for m in list(sys.modules.values()):\n"
            "    f = getattr(m, '__file__', None)\n"
            "    if f and '.' not in m.__name__: print(m.__name__, f)",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    ).stdout
    stdlib = [Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "platstdlib")]
    lib.mkdir()
    for line in listing.splitlines():
        name, file = line.split(" ", 1)
        path = Path(file).resolve()
        installed = {"site-packages", "dist-packages"} & set(path.parts)
        if not installed and any(path.is_relative_to(root) for root in stdlib):
            continue  # the system Python has its own standard library
        if path.name.startswith("__init__."):
            shutil.copytree(path.parent, lib / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, lib / path.name)
    for entry in [lib, *lib.rglob("*")]:
        os.chmod(entry, 0o755 if entry.is_dir() else 0o644)
    return lib


@pytest.mark.skipif(os.getuid() != 0, reason="creates a home for an unprivileged user; needs root")
@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
def test_a_non_root_user_is_confined_too(mode):
    """Run by an unprivileged user (nobody), the sandbox still confines: their 0600 key and
    their home are out of reach, or the sandbox refuses to start; never runs unconfined."""
    import pwd

    system_python = f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"
    if not os.path.exists(system_python):
        pytest.skip(f"no {system_python} for the unprivileged user to run")
    nobody = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="vf-nonroot-"))  # pytest's own tmp is root-only
    request_cleanup = base
    os.chmod(base, 0o755)
    home = base / "home"
    home.mkdir()
    os.chown(home, nobody.pw_uid, nobody.pw_gid)
    env = {
        "HOME": str(home),
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(_readable_copy_of_the_sandbox(base / "lib")),
    }
    result = subprocess.run(
        [
            shutil.which("runuser") or "/usr/sbin/runuser",
            "-u",
            "nobody",
            "--",
            system_python,
            "-c",
            NON_ROOT_PROBE,
            mode,
            str(home),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    shutil.rmtree(request_cleanup, ignore_errors=True)
    line = next((x for x in result.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, result.stderr[-2000:]
    outcome = json.loads(line[len("RESULT ") :])
    if "refused" in outcome:  # no confinement possible for this user here: refusing is right
        assert "isolation" in outcome["refused"] or "landlock" in outcome["refused"].lower()
        return
    inside = outcome["inside"]
    key, listing = str(home / "id_ed25519"), str(home)
    assert inside[key] != "PRIVATE KEY" and inside[listing] in (
        "PermissionError",
        "FileNotFoundError",
    ), inside
    assert outcome["mode"] == mode
