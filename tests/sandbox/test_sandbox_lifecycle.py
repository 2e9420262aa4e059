"""Sandboxes through environments: state within a rollout and never across, teardown on errors,
a crashed sandbox as data on its rollout, and none surviving Ctrl-C or the parent's death."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from support.sandboxes import python_policy, sandbox_pids, wait_until_no_sandboxes

import verifiers as vf
from verifiers.testing import Reply


async def test_python_env_state_persists_within_a_rollout_never_across(server, client):
    env = vf.PythonEnv(dataset=[{"question": "q"}], pool_size=1)
    server.set_handler(
        python_policy(
            "try:\n    print(counter)\nexcept NameError:\n    counter = 0\ncounter += 1\nprint('counter', counter)",
            "counter += 1\nprint('counter', counter)",
        )
    )
    out = await env.evaluate(client, "m", rollouts_per_example=3)
    for state in out.state:
        tools = [m["content"] for m in state["completion"] if m["role"] == "tool"]
        assert tools == ["counter 1", "counter 2"]  # each rollout starts from nothing
    assert wait_until_no_sandboxes() == []  # destroyed at rollout end, pool closed at run end
    meta_mode = env.run_metadata()["sandbox_mode"]
    assert meta_mode in ("bwrap", "landlock")


async def test_sandbox_env_bash_and_teardown_on_errors(server, client):
    env = vf.SandboxEnv(dataset=[{"question": "q"}], pool_size=0)
    server.set_handler(
        lambda req: (
            Reply(tool_calls=[Reply.tool_call("bash", {"command": "echo hi > f.txt && cat f.txt"})])
            if not any(m["role"] == "tool" for m in req["messages"])
            else Reply(status=400, error="model broke")
        )
    )
    out = await env.evaluate(client, "m")
    state = out.state[0]
    assert [m["content"] for m in state["completion"] if m["role"] == "tool"] == ["hi"]
    assert state["error"]["type"] == "BadRequestError"  # the rollout failed after the tool call ...
    assert wait_until_no_sandboxes() == []  # ... and its sandbox was still destroyed


async def test_crashed_sandbox_becomes_data_on_the_rollout(server, client):
    """The snippet crashes its worker: with SIGINT, which stops a worker forked from the zygote
    too (pid 1 of its namespace, which ignores the SIGKILL of its own processes)."""
    env = vf.PythonEnv(dataset=[{"question": "q"}], pool_size=0)
    server.set_handler(
        python_policy("import os, signal\nos.kill(os.getppid(), signal.SIGINT)", "print('after')")
    )
    out = await env.evaluate(client, "m")
    state = out.state[0]
    tools = [m["content"] for m in state["completion"] if m["role"] == "tool"]
    assert state["error"] is None and len(tools) == 2
    assert any("SandboxError" in t for t in tools) and state.get("sandbox_errors")
    assert wait_until_no_sandboxes() == []


RUNNER = textwrap.dedent("""
    import sys, verifiers as vf
    from verifiers.testing import Reply
    env = vf.PythonEnv(dataset=[{"question": str(i)} for i in range(4)], pool_size=2)
    env.evaluate_sync(sys.argv[1], "m", max_concurrent=4)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "parent-death"])
def test_no_sandbox_survives_ctrl_c_or_parent_death(server, sig):
    server.set_handler(
        lambda req: Reply(
            tool_calls=[Reply.tool_call("python", {"code": "import time; time.sleep(30)"})]
        )
    )
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, server.base_url], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while len(sandbox_pids()) < 4:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    os.kill(proc.pid, sig)
    proc.wait(timeout=30)
    assert wait_until_no_sandboxes() == []
    # what a killed process could not clean (its dirs and disks) goes with the next sandbox
    from verifiers.sandbox.local import _remove_stale_dirs

    left = list(Path(tempfile.gettempdir()).glob(f"vf-sandbox-*-{proc.pid}.*"))
    if sig == signal.SIGKILL:
        assert left, "SIGKILL runs no cleanup: the killed process's sandbox dirs are still there"
    _remove_stale_dirs()
    leftovers = list(Path(tempfile.gettempdir()).glob(f"vf-sandbox-*-{proc.pid}.*"))
    assert leftovers == [] and not any(
        f"-{proc.pid}." in m and "vf-sandbox-" in m
        for m in Path("/proc/mounts").read_text().splitlines()
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a disk needs root")
def test_the_cleanup_of_dead_sandboxes_touches_no_link_and_no_other_users_directory(
    tmp_path, left_by_the_dead
):
    """As root, the cleanup unmounted ``DIR/work`` and ``DIR/tmp`` of every ``/tmp`` entry named
    like a dead process's sandbox: another user's link named so, pointing at ``/``, would have had
    ``/tmp`` unmounted. Now only this user's real directories are judged."""
    from verifiers.processes.leftovers import owned_dir
    from verifiers.sandbox.local import HOST_DIR_PREFIX, _remove_stale_dirs

    name = left_by_the_dead(HOST_DIR_PREFIX).rsplit(".", 1)[0]
    mine = owned_dir(HOST_DIR_PREFIX)  # a live process's (this one's)
    target = tmp_path / "target"
    (target / "work").mkdir(parents=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(target / "work")], check=True
    )
    try:
        (target / "work" / "kept").write_text("x")
        link = Path(tempfile.gettempdir()) / f"{name}.linklink"
        link.symlink_to(target)
        theirs = Path(tempfile.gettempdir()) / f"{name}.theirsxx"
        theirs.mkdir()
        (theirs / "file").write_text("theirs")
        os.chown(theirs, 65534, 65534)
        _remove_stale_dirs()
        assert os.path.ismount(target / "work") and (target / "work" / "kept").exists()
        assert link.is_symlink() and (theirs / "file").exists() and mine.is_dir()
        # judged, then swapped for a link by another user before the unmount (two root hosts
        # starting at once: one removes the leftover, the attacker plants a link in its place)
        swapped = Path(tempfile.gettempdir()) / f"{name}.swapped1"
        swapped.symlink_to(target)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("verifiers.sandbox.local.abandoned", lambda *_, **__: [swapped])
            _remove_stale_dirs()
        assert os.path.ismount(target / "work") and (target / "work" / "kept").exists()
        # legitimate: this user's directory of a dead process goes
        abandoned = mine.with_name(f"{name}.abandond")
        abandoned.mkdir()
        _remove_stale_dirs()
        assert not abandoned.exists()
    finally:
        subprocess.run(["umount", str(target / "work")], check=False)
        for path in Path(tempfile.gettempdir()).glob(f"{name}.*"):
            subprocess.run(["rm", "-rf", str(path)], check=False)
        subprocess.run(["rm", "-rf", str(mine)], check=False)


def test_leftovers_are_judged_only_where_nobody_else_could_have_named_them(
    tmp_path, left_by_the_dead
):
    """In a directory others may write to without the sticky bit (a team's shared pull or
    checkpoint directory), another user could rename a victim's directory to a leftover's name
    and have the victim delete it: there, nothing is judged. A sticky one (like ``/tmp``) is
    judged; one that cannot be listed yields nothing instead of failing the caller."""
    from verifiers.processes.leftovers import abandoned

    shared = tmp_path / "shared"
    shared.mkdir()
    left = shared / left_by_the_dead(".run-")
    left.mkdir()
    shared.chmod(0o777)
    assert abandoned(shared, r"\.run-") == []
    shared.chmod(0o1777)
    assert abandoned(shared, r"\.run-") == [left]
    shared.chmod(0o755)
    assert abandoned(shared, r"\.run-") == [left]
    if os.geteuid() != 0:  # root lists anything
        shared.chmod(0o333)
        assert abandoned(shared, r"\.run-") == []
    assert abandoned(tmp_path / "missing", r"\.run-") == []
    (tmp_path / "a-file").write_text("")
    assert abandoned(tmp_path / "a-file", r"\.run-") == []
    shared.chmod(0o755)
    # under a lock every maker held while alive (a run directory's), the maker is not judged:
    # another host's or boot's staging goes too, but still never a link
    elsewhere = shared / left_by_the_dead(".run-", elsewhere=True)
    elsewhere.mkdir()
    (shared / left.name.replace("abcdefgh", "linkedxx")).symlink_to(tmp_path)
    assert abandoned(shared, r"\.run-") == [left]
    assert sorted(abandoned(shared, r"\.run-", any_maker=True)) == sorted([left, elsewhere])
    shared.chmod(0o777)
    assert abandoned(shared, r"\.run-", any_maker=True) == []
    shared.chmod(0o755)


@pytest.mark.parametrize("window", ["start", "destroy"])
def test_a_stop_between_a_directory_and_its_cleanup_leaves_no_directory(tmp_path, window):
    """SIGINT's ``SystemExit`` (benchmarks/stop_cleanly.py) can land after a start made its
    directory but before the sandbox is registered for the exit hook, or after a destroy took it
    off that list but before its files went: the exit hook still removes what this process made."""
    scratch = tmp_path / "t"
    scratch.mkdir()
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from verifiers.sandbox import LocalSandboxProvider, local

        async def main():
            provider = LocalSandboxProvider(mode="unsafe", pool_size=0)
            if {window!r} == "start":
                local.package_dirs = lambda packages: sys.exit(3)  # just after the claim
            else:
                local.LocalSandbox._remove_files = lambda self: sys.exit(3)  # just before
            box = await provider.create()
            await box.destroy()

        asyncio.run(main())
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "TMPDIR": str(scratch)},
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 3, proc.stderr.decode()[-2000:]
    assert list(scratch.iterdir()) == []
