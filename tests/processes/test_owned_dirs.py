"""A directory ``owned_dir`` made goes when its maker exits, however it exits short of SIGKILL
(whose leftovers the next maker removes): a benchmark stopped by SIGINT left a sandbox's
directory behind, the signal's exception having landed between its making and its cleanup."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path


def run(script: str, scratch: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env={**os.environ, "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_directory_its_owner_never_cleaned_goes_when_the_process_exits(tmp_path):
    scratch = tmp_path / "t"
    scratch.mkdir()
    done = run(
        """
        from verifiers.processes.leftovers import owned_dir
        made = owned_dir("vf-probe-")
        (made / "file").write_text("x")
        print(made)
        raise KeyboardInterrupt  # as Ctrl-C would, before any cleanup of the owner's
        """,
        scratch,
    )
    assert "KeyboardInterrupt" in done.stderr
    assert Path(done.stdout.strip()).parent == scratch
    assert list(scratch.iterdir()) == []


def test_what_was_renamed_into_place_or_replaced_and_a_forked_childs_exit_are_left_alone(
    tmp_path,
):
    """A staging directory renamed into place is a result, not scratch; a name that now holds
    something else (a link to the owner's files) is not the directory that was made; and a forked
    child exiting normally runs the hooks it inherited, which must not remove its parent's."""
    scratch = tmp_path / "t"
    scratch.mkdir()
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "precious").write_text("x")
    done = run(
        f"""
        import os, sys
        from pathlib import Path
        from verifiers.processes.leftovers import owned_dir, staging_dir
        staged = staging_dir("result", Path({str(tmp_path)!r}))
        (staged / "data").write_text("x")
        staged.rename(Path({str(tmp_path)!r}) / "result")
        swapped = owned_dir("vf-swapped-", Path({str(tmp_path)!r}))
        swapped.rmdir()
        swapped.symlink_to({str(kept)!r})
        parents = owned_dir("vf-parent-")
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # runs the inherited exit hooks
        os.waitpid(pid, 0)
        print(parents.is_dir())
        """,
        scratch,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"  # the child's exit left the parent's directory
    assert (tmp_path / "result" / "data").exists() and (kept / "precious").exists()
    assert [p.name for p in tmp_path.glob("vf-swapped-*") if p.is_symlink()]
    assert list(scratch.iterdir()) == []  # and the parent's own exit removed it
