"""Sandboxes forked from the zygote: confined exactly as bubblewrap confines a cold one, holding
nothing of another sandbox, and still started, confined, after the zygote dies."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import textwrap
import uuid

import pytest
from support.sandboxes import available_modes

from verifiers.sandbox import LocalSandboxProvider, SandboxLimits
from verifiers.sandbox.base import SandboxError
from verifiers.sandbox.zygote import ZygoteProcess, stop, zygote_pid

pytestmark = pytest.mark.skipif(
    "bwrap" not in available_modes() or os.getuid() != 0,
    reason="the zygote serves bubblewrap-mode sandboxes of a root host",
)

# What a snippet sees of its confinement, with what differs between any two sandboxes (their
# uid, their budget's name, mount ids, sizes) replaced by its kind.
VIEW = textwrap.dedent("""
    import json, os, re, resource, sys
    def entry(path):
        st = os.lstat(path)
        link = os.readlink(path) if os.path.islink(path) else ""
        own = os.getuid()
        return [path, oct(st.st_mode), *("UID" if i == own else i for i in (st.st_uid, st.st_gid)), link]
    files = []
    for top, dirs, names in os.walk("/"):
        if top in ("/proc", "/sys") or top.startswith("/usr") or top.count("/") > 5:
            dirs[:] = []
            continue
        files += [entry(os.path.join(top, n)) for n in sorted(dirs + names)]
    mounts = []
    for line in open("/proc/self/mountinfo"):
        before, after = line.split(" - ")
        fields, (fstype, source, options) = before.split(), after.split()
        tags = sorted(re.sub(r":\\d+", "", t) for t in fields[6:])
        options = re.sub(r"(size|nr_inodes)=\\w+,?", "", options)
        mounts.append([fields[4], fields[3], fields[5], tags, fstype, source, options])
    status = dict(l.split(":\\t", 1) for l in open("/proc/self/status").read().splitlines())
    uid = os.getuid()
    ids = {k: status[k].replace(str(uid), "UID").strip() for k in ("Uid", "Gid", "Groups")}
    caps = {k: status[k].strip() for k in ("CapInh", "CapPrm", "CapEff", "CapAmb")}
    limits = {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")}
    fds = {}
    for fd in os.listdir("/proc/self/fd"):
        try:  # the listing's own descriptor is gone by now
            fds[fd] = re.sub(r"\\[\\d+\\]", "", os.readlink("/proc/self/fd/" + fd))
        except FileNotFoundError:
            pass
    umask = os.umask(0)
    cgroup = re.sub(r"vf-sandbox-\\d+-[0-9a-f]+", "BUDGET", open("/proc/self/cgroup").read())
    # the budget, seen from a cgroup namespace made before or after the move into it (a race
    # in both ways of starting: the host moves the first process while it unshares)
    cgroup = re.sub(r":((/\\.\\.)*/BUDGET|/)$", ":OWN", cgroup, flags=re.M)
    inet6 = open("/proc/net/if_inet6").read()
    print(json.dumps({
        "uid_is_a_sandbox_uid": uid >= 1900000000,
        "ids": ids, "caps": caps, "bounding": int(status["CapBnd"], 16),
        "no_new_privs": status["NoNewPrivs"], "seccomp": [status["Seccomp"], status["Seccomp_filters"]],
        "files": sorted(files), "mounts": sorted(mounts), "limits": limits, "env": dict(os.environ),
        "cwd": os.getcwd(), "umask": umask, "fds": fds, "cgroup": cgroup,
        "session": os.getsid(0), "own_group": os.getpgid(0) == os.getpid(),
        "hostname": os.uname().nodename, "net": [l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:]],
        "loopback_up": "00000000000000000000000000000001" in inet6,
        "flags": [sys.flags.isolated, sys.flags.no_site, sys.flags.no_user_site], "path": sys.path,
    }))
""")


async def _view(zygote: bool, limits: SandboxLimits) -> dict:
    provider = LocalSandboxProvider(mode="bwrap", pool_size=0, limits=limits, zygote=zygote)
    box = await provider.create()
    try:
        assert isinstance(box.process, ZygoteProcess) is zygote
        result = await box.run_python(VIEW)
        assert result.exit_code == 0, result.stderr
        return json.loads(result.stdout)
    finally:
        await provider.close()


@pytest.mark.parametrize(
    "limits",
    [SandboxLimits(), SandboxLimits(packages=["mpmath"], read_only_dirs=["/etc/ssl"])],
    ids=["default", "packages-and-read-only-dirs"],
)
async def test_a_zygote_sandbox_is_confined_exactly_as_a_bubblewrap_one(limits):
    """The same files (paths, modes, owners, links), mounts (points, flags, file systems),
    identity, capabilities, filter, rlimits, environment, descriptors, cgroup, network and
    interpreter flags: only the capability bounding set differs, narrower from the zygote (it is
    dropped to setuid/setgid; bubblewrap as root keeps it whole, and neither can be used by the
    sandbox uid under no-new-privileges)."""
    cold, forked = await _view(False, limits), await _view(True, limits)
    assert cold["uid_is_a_sandbox_uid"] and cold["seccomp"] == ["2", "1"]
    assert forked["bounding"] & ~cold["bounding"] == 0
    assert forked["bounding"] == (1 << 6) | (1 << 7)
    del cold["bounding"], forked["bounding"]
    for key in cold:
        assert forked[key] == cold[key], key


def _memory(pid: int) -> bytes:
    """Every readable private mapping of a process (the host is root)."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            fields = line.split()
            if not fields[1].startswith("r") or (len(fields) > 5 and fields[5].startswith("[v")):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                mem.seek(start)
                chunks.append(mem.read(end - start))
            except OSError:
                pass
    return b"".join(chunks)


async def test_a_sandbox_forked_from_the_zygote_sees_nothing_of_the_one_before():
    """A sandbox leaves files, environment, a REPL and a running process behind; the next one
    forked (while it lives, and after it is gone) finds none of them in its files, environment,
    descriptors or processes, and neither its worker's memory nor the zygote's holds the first
    one's data or host directory (nor the second's own: its options are wiped once applied)."""
    marker = f"vf-zygote-marker-{uuid.uuid4().hex}"
    provider = LocalSandboxProvider(mode="bwrap", pool_size=0)
    first = await provider.create()
    look = textwrap.dedent(f"""
        import os
        seen = [os.listdir("/workspace"), os.listdir("/tmp"), dict(os.environ)]
        for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
            for name in ("cmdline", "environ"):
                try:
                    seen.append(open(f"/proc/{{pid}}/{{name}}", "rb").read())
                except OSError:
                    pass
        seen.append(os.listdir("/proc/self/fd"))
        print(repr(seen))
        print("{marker[:10]}" + "{marker[10:]}" in repr(seen))
    """)
    try:
        await first.upload("left.txt", marker.encode())
        await first.run_shell(f"echo {marker} > /tmp/left; (sleep 60; echo {marker}) &")
        await first.run_repl(f"import os\nos.environ['VF_MARK'] = '{marker}'\nkept = '{marker}'")
        assert (await first.download("left.txt")) == marker.encode()
        second = await provider.create()
        await first.destroy()
        third = await provider.create()
        zygote = zygote_pid()
        assert zygote is not None
        for box in (second, third):
            result = await box.run_python(look)
            assert result.stdout.endswith("False\n"), result
            seen = result.stdout
            assert "[[], []," in seen  # an empty work dir and /tmp
            assert "VF_MARK" not in seen
        for pid, own in ((zygote, None), (second.process.pid, second.host_dir)):
            memory = _memory(pid)
            assert b"vf_sandbox_worker" in memory  # read: the worker's code is there
            assert marker.encode() not in memory
            assert str(first.host_dir).encode() not in memory
            if own is not None:
                assert str(own).encode() not in memory
    finally:
        await provider.close()


async def test_a_dead_zygote_is_replaced_and_the_next_sandbox_is_confined():
    """Killing the zygote takes the sandboxes it forked with it (their next request fails as a
    crashed sandbox's); the next start forks from a fresh zygote, and that sandbox is confined
    (its own uid, the filter, no host files)."""
    provider = LocalSandboxProvider(mode="bwrap", pool_size=0)
    try:
        box = await provider.create()
        old = zygote_pid()
        assert old is not None
        os.kill(old, signal.SIGKILL)
        # the worker's parent-death signal, delivered by the kernel
        await asyncio.wait_for(box.process.wait(), 10)
        with pytest.raises(SandboxError, match=r"crashed|stopped answering"):
            await box.run_python("print(1)")
        fresh = await provider.create()
        assert zygote_pid() not in (None, old)
        result = await fresh.run_python(
            "import os\n"
            "print(os.getuid() >= 1900000000, open('/proc/self/status').read().count('Seccomp:\\t2'))\n"
            "print(os.path.exists('" + str(fresh.host_dir) + "'), os.listdir('/workspace'))"
        )
        assert result.stdout == "True 1\nFalse []\n", result
        assert re.search(r"vf-sandbox-", str(fresh.host_dir))
    finally:
        await provider.close()


async def test_a_forked_host_process_starts_a_zygote_of_its_own():
    """A process forked from one that holds a zygote (a worker pool's template does) never
    talks to the parent's zygote, whose replies are the parent's: it starts its own, and the
    parent's sandboxes go on."""
    provider = LocalSandboxProvider(mode="bwrap", pool_size=0)
    try:
        box = await provider.create()
        parent_zygote = zygote_pid()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(read)

                async def child() -> str:
                    own = LocalSandboxProvider(mode="bwrap", pool_size=0)
                    sandbox = await own.create()
                    answer = (await sandbox.run_python("print(6 * 7)")).stdout.strip()
                    await own.close()
                    return f"{zygote_pid()} {answer}"

                os.write(write, asyncio.run(child()).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        with os.fdopen(read, "rb") as stream:
            reply = await asyncio.to_thread(stream.read)
        _, status = await asyncio.to_thread(os.waitpid, pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        child_zygote, answer = reply.decode().split()
        assert answer == "42" and int(child_zygote) != parent_zygote
        assert zygote_pid() == parent_zygote
        assert (await box.run_python("print(1)")).stdout == "1\n"
    finally:
        await provider.close()


async def test_a_provider_starts_the_zygote_before_its_first_sandbox():
    """Made, a provider starts the zygote in the background (while a run loads its data); its
    first sandbox is forked from that one, not from a second."""
    stop()
    assert zygote_pid() is None
    provider = LocalSandboxProvider(mode="bwrap", pool_size=0)
    try:
        for _ in range(1000):  # the background start has made its process
            if zygote_pid() is not None:
                break
            await asyncio.sleep(0.01)
        started = zygote_pid()
        assert started is not None
        box = await provider.create()
        assert zygote_pid() == started
        assert (await box.run_python("print(1)")).stdout == "1\n"
    finally:
        await provider.close()


def _environ(pid: int | None) -> list[str]:
    with open(f"/proc/{pid}/environ") as f:
        return f.read().split("\0")


async def test_the_zygote_binds_its_symbols_at_start_and_no_sandbox_sees_how():
    """The zygote's interpreter starts with ``LD_BIND_NOW`` (every symbol resolved once, so no
    snippet's fork has the dynamic linker write the symbol table again); a sandbox's
    environment is its own all the same, in Python and in the shell."""
    provider = LocalSandboxProvider(mode="bwrap", pool_size=0)
    try:
        box = await provider.create()
        assert isinstance(box.process, ZygoteProcess)
        assert "LD_BIND_NOW=1" in _environ(zygote_pid())
        python = await box.run_python("import os\nprint('LD_BIND_NOW' in os.environ)")
        shell = await box.run_shell("env | grep -c LD_ || true")
        assert (python.stdout, shell.stdout) == ("False\n", "0\n"), (python, shell)
    finally:
        await provider.close()


def _confine_in_a_child(options: list[str]) -> str:
    """What the zygote's confinement says of ``options``, run in a forked child of its own
    mount namespace (nothing it mounts reaches this host)."""
    from verifiers.sandbox import zygote_main

    read, write = os.pipe()
    options_read, options_write = os.pipe()
    os.write(options_write, b"".join(o.encode() + b"\0" for o in options))
    os.close(options_write)
    pid = os.fork()
    if pid == 0:
        try:
            zygote_main.confine(options_read)
            os.write(write, b"applied")
        except OSError as error:
            os.write(write, str(error).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.close(options_read)
    with os.fdopen(read, "rb") as stream:
        said = stream.read().decode()
    os.waitpid(pid, 0)
    return said


def test_the_zygote_refuses_an_option_it_cannot_apply_or_a_path_out_of_the_new_root():
    """An option the zygote does not implement is refused before anything is applied (it would
    otherwise be silently missing from the sandbox), and so is a bind whose path runs through a
    link the options made out of the new root (built before the pivot, it would reach the
    host's tree)."""
    assert "cannot apply '--unshare-user'" in _confine_in_a_child(["--unshare-user"])
    escape = ["--symlink", "/usr", "/out", "--ro-bind", "/etc", "/out/etc"]
    assert "/out/etc is not inside the new root" in _confine_in_a_child(escape)
