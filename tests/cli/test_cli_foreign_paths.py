"""Every command that writes where the user says refuses a path another local user controls.

Issue 43 (third attack pass): as root, ``vf-data -o /tmp/x`` or ``vf-report -o /tmp/x.html`` wrote
through a directory, link or file uid 65534 had made there first. Each command below is attacked
the same way, by a real second user (uid 65534, so these tests need root, as CI is), and must
refuse with exit 2 and the reason, writing nothing; the same commands then work in a path of the
user's own, in the same shared sticky directory (SECURITY.md, "Output directories").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from verifiers.processes.own_dir import write_own_file

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="plants paths as another user (uid 65534), which needs root"
)

Main = Callable[[list[str]], int]


@dataclass(frozen=True)
class Shared:
    """A sticky, world-writable directory in /tmp (as /tmp is) where uid 65534 came first."""

    root: Path  # 1777, the user's
    theirs: Path  # uid 65534's directory, 0755
    victim: Path  # a directory of the user's that the links point at
    victim_file: Path  # a file of the user's that the file links point at
    run: Path  # a vf-eval run of the user's (results.jsonl, metadata.json), vf-data's and vf-report's input


def as_nobody(script: str, cwd: Path) -> None:
    subprocess.run(["sh", "-c", script], cwd=cwd, check=True, user=65534, group=65534)


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Shared]:
    root = Path(tempfile.mkdtemp(prefix="vf-shared-", dir="/tmp"))
    root.chmod(0o1777)
    victim = tmp_path / "victim"
    victim.mkdir()
    victim_file = victim / "keep.txt"
    victim_file.write_text("the user's own file\n")
    as_nobody(
        "mkdir theirs && chmod 755 theirs && echo theirs > their-file && "
        f"ln -s {victim} dir-link && ln -s {victim_file} file-link && "
        f"ln -s {victim} theirs/dir-link && ln -s {victim_file} theirs/file-link",
        root,
    )
    (root / "theirs" / "mine").mkdir()  # the user's own dir, but under theirs
    (root / "open").mkdir()
    (root / "open").chmod(0o777)  # the user's, anyone may rename what is in it: no sticky bit
    run = tmp_path / "run"
    run.mkdir()
    row = {
        "example_id": 0,
        "rollout_index": 0,
        "prompt": [{"role": "user", "content": "q"}],
        "completion": [{"role": "assistant", "content": "a"}],
        "reward": 1.0,
    }
    (run / "results.jsonl").write_text(json.dumps(row) + "\n")
    (run / "metadata.json").write_text(json.dumps({"env_id": "e", "model": "m"}))
    try:
        yield Shared(root, root / "theirs", victim, victim_file, run)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def snapshot(shared: Shared) -> dict[str, str | bytes]:
    """Every path under the shared dir and the victim, with what it is: nothing may change."""
    seen: dict[str, str | bytes] = {}
    for top in (shared.root, shared.victim):
        for path in sorted(top.rglob("*")):
            if path.is_symlink():
                seen[str(path)] = "-> " + os.readlink(path)
            elif path.is_file():
                seen[str(path)] = path.read_bytes()
            else:
                seen[str(path)] = "dir"
    return seen


def vf_data(argv: list[str]) -> int:
    from verifiers.cli.data import main

    return main(argv)


def vf_report(argv: list[str]) -> int:
    from verifiers.cli.report import main

    return main(argv)


def vf_init(argv: list[str]) -> int:
    from verifiers.cli.init import main

    return main(argv)


def vf_eval(argv: list[str]) -> int:
    from verifiers.cli.eval import main

    return main(argv)


def prime(argv: list[str]) -> int:
    from hub_client.cli import main

    return main(argv)


# each command that writes into a directory the user names: (its main, argv for a directory)
DIR_COMMANDS: dict[str, Callable[[Shared, Path], tuple[Main, list[str]]]] = {
    "vf-data -o": lambda s, d: (vf_data, [str(s.run), "-o", str(d)]),
    "vf-init -p": lambda s, d: (vf_init, ["word-count", "-p", str(d)]),
    "vf-eval --output-dir": lambda s, d: (
        vf_eval,
        ["reverse-text", "-b", "http://127.0.0.1:9/v1", "--output-dir", str(d)],
    ),
    "prime env init -p": lambda s, d: (prime, ["env", "init", "word-count", "-p", str(d)]),
    "prime env pull -d": lambda s, d: (prime, ["env", "pull", "someone/thing", "-d", str(d)]),
    "prime hub create-user --data-dir": lambda s, d: (
        prime,
        ["hub", "create-user", "alice", "--data-dir", str(d)],
    ),
}

# (the directory, under the shared one, and what the refusal says)
DIR_ATTACKS = {
    "their directory": ("theirs", "belongs to uid 65534, not to you"),
    "their link": ("dir-link", "is not a directory of its own"),
    "their link in their directory": ("theirs/dir-link", "belongs to uid 65534"),
    "a directory of mine under theirs": ("theirs/mine", "belongs to uid 65534"),
    "a new directory under theirs": ("theirs/new", "belongs to uid 65534"),
    "a directory under one anyone may change": ("open/new", "may be changed by anyone"),
}


@pytest.mark.parametrize("attack", DIR_ATTACKS)
@pytest.mark.parametrize("command", DIR_COMMANDS)
def test_a_directory_another_user_controls_is_refused_and_nothing_is_written(
    shared, command, attack, capsys
):
    where, says = DIR_ATTACKS[attack]
    main, argv = DIR_COMMANDS[command](shared, shared.root / where)
    before = snapshot(shared)
    assert main(argv) == 2
    err = capsys.readouterr().err.replace("\n", "")
    assert says in err, err
    assert "Traceback" not in err
    assert snapshot(shared) == before


# each command that writes a file the user names: (its main, argv for a file)
FILE_COMMANDS: dict[str, Callable[[Shared, Path], tuple[Main, list[str]]]] = {
    "vf-report -o": lambda s, f: (vf_report, [str(s.run), "-o", str(f)]),
    "prime env install --lock-file": lambda s, f: (
        prime,
        ["env", "install", "someone/thing", "--lock-file", str(f)],
    ),
    "prime env uninstall --lock-file": lambda s, f: (
        prime,
        ["env", "uninstall", "someone/thing", "--lock-file", str(f)],
    ),
    "prime hub create-user --db sqlite:///": lambda s, f: (
        prime,
        ["hub", "create-user", "alice", "--data-dir", str(s.run), "--db", f"sqlite:///{f}"],
    ),
}

FILE_ATTACKS = {
    "their file": ("their-file", "belongs to uid 65534, not to you"),
    "their link": ("file-link", "is a link or not a regular file"),
    "their link in their directory": ("theirs/file-link", "belongs to uid 65534"),
    "a new file in their directory": ("theirs/new.html", "belongs to uid 65534"),
    "a file in a directory anyone may change": ("open/new.html", "may be changed by anyone"),
}


@pytest.mark.parametrize("attack", FILE_ATTACKS)
@pytest.mark.parametrize("command", FILE_COMMANDS)
def test_a_file_another_user_controls_is_refused_and_nothing_is_written(
    shared, command, attack, capsys
):
    where, says = FILE_ATTACKS[attack]
    main, argv = FILE_COMMANDS[command](shared, shared.root / where)
    before = snapshot(shared)
    assert main(argv) == 2
    err = capsys.readouterr().err.replace("\n", "")
    assert says in err, err
    assert snapshot(shared) == before
    assert shared.victim_file.read_text() == "the user's own file\n"


def test_the_same_commands_write_a_new_path_of_the_users_own_in_the_shared_directory(shared):
    """The checks refuse what others control, not the shared directory itself: a new dir or
    file there is the user's (the sticky bit keeps others from renaming it)."""
    import datasets

    assert vf_data([str(shared.run), "-o", str(shared.root / "data")]) == 0
    assert datasets.load_dataset(str(shared.root / "data"), split="train").num_rows == 1
    assert vf_report([str(shared.run), "-o", str(shared.root / "report.html")]) == 0
    assert "<html" in (shared.root / "report.html").read_text().lower()
    assert vf_report([str(shared.run)]) == 0  # its default, in the user's own run dir
    assert (shared.run / "report.html").is_file()
    assert vf_init(["word-count", "-p", str(shared.root / "envs")]) == 0
    assert (shared.root / "envs" / "word_count" / "pyproject.toml").is_file()
    assert prime(["env", "init", "word-count", "-p", str(shared.root / "prime-envs")]) == 0
    assert (shared.root / "prime-envs" / "word_count" / "word_count.py").is_file()
    assert prime(["hub", "create-user", "alice", "--data-dir", str(shared.root / "hub")]) == 0
    assert (shared.root / "hub" / "hub.sqlite3").is_file()
    assert (shared.root / "hub").stat().st_mode & 0o777 == 0o700


def test_prime_hub_serve_refuses_a_data_dir_another_user_made(shared):
    """``prime hub serve`` as users start it: refused before it listens or opens a store."""
    done = subprocess.run(
        [
            *(sys.executable, "-m", "hub_client.cli", "hub", "serve", "--port", "0"),
            *("--data-dir", str(shared.theirs)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "belongs to uid 65534, not to you" in done.stderr.replace("\n", "")
    assert sorted(p.name for p in shared.theirs.iterdir()) == ["dir-link", "file-link", "mine"]


def test_a_staging_dir_beside_the_blob_dir_that_another_user_made_is_refused(shared, capsys):
    """A ``file:///`` blob store stages the official client's pushes in ``BLOBS.staging``
    beside it: an outside attack made ``/tmp/b.staging`` (0777, uid 65534's) before the user
    ran ``prime hub serve --blobs file:///tmp/b``, and the hub staged a private push's bytes
    there, for uid 65534 to delete or swap. That dir, or a link there, is refused as the blob
    dir itself is, before anything is written; a blob dir whose staging dir is new works, both
    made 0700."""
    as_nobody(
        f"mkdir b.staging && chmod 777 b.staging && ln -s {shared.victim} c.staging", shared.root
    )
    victim_before = sorted(p.name for p in shared.victim.iterdir())
    for blobs, said in (("b", "belongs to uid 65534"), ("c", "is not a directory of its own")):
        argv = ["hub", "create-user", "alice", "--data-dir", str(shared.root / f"hub-{blobs}")]
        assert prime([*argv, "--blobs", f"file://{shared.root / blobs}"]) == 2
        refusal = capsys.readouterr().err.replace("\n", "")
        assert said in refusal and f"{blobs}.staging" in refusal, refusal
        assert not (shared.root / f"hub-{blobs}" / "hub.sqlite3").exists()
    assert not list((shared.root / "b.staging").iterdir())
    assert sorted(p.name for p in shared.victim.iterdir()) == victim_before
    argv = ["hub", "create-user", "alice", "--data-dir", str(shared.root / "hub")]
    assert prime([*argv, "--blobs", f"file://{shared.root / 'blobs'}"]) == 0
    for made in ("blobs", "blobs.staging"):
        assert (shared.root / made).stat().st_mode & 0o777 == 0o700


def test_a_link_or_fifo_planted_after_the_check_is_not_written_through(shared):
    """The window between the check and the write: ``write_own_file`` opens without following
    a link, never waits on a FIFO and never truncates a file that is not the user's."""
    target = shared.root / "late.html"
    as_nobody(f"ln -s {shared.victim_file} late.html && mkfifo late.fifo", shared.root)
    with pytest.raises(OSError):
        write_own_file(target, "overwritten")
    assert shared.victim_file.read_text() == "the user's own file\n"
    with pytest.raises(OSError):
        write_own_file(shared.root / "late.fifo", "blocked")
    assert (shared.root / "their-file").read_text() == "theirs\n"
    with pytest.raises(PermissionError, match="not a file of your own"):
        write_own_file(shared.root / "their-file", "overwritten")
    assert (shared.root / "their-file").read_text() == "theirs\n"
    write_own_file(shared.root / "mine.html", "mine")
    assert (shared.root / "mine.html").read_text() == "mine"


def test_a_second_name_of_a_users_file_in_a_shared_dir_is_not_written_through(shared):
    """Where ``fs.protected_hardlinks`` is 0 (the kernel's default), another user may hard-link
    a file of the user's (``~/.bashrc``) into /tmp: the name is the user's file, owned by them,
    not a symlink, so ``vf-report -o /tmp/x.html`` truncated and rewrote it. A file with more
    than one name is refused, at the check and at the write. (The link is made here as the
    user: this host protects hard links, and what it leaves in /tmp is the same.)"""
    planted = shared.root / "report.html"
    os.link(shared.victim_file, planted)
    assert vf_report([str(shared.run), "-o", str(planted)]) == 2
    assert shared.victim_file.read_text() == "the user's own file\n"
    with pytest.raises(PermissionError, match="more than one name"):
        write_own_file(planted, "overwritten")
    assert shared.victim_file.read_text() == "the user's own file\n"
    planted.unlink()
    assert vf_report([str(shared.run), "-o", str(planted)]) == 0
    assert "<html" in planted.read_text().lower()
    assert shared.victim_file.read_text() == "the user's own file\n"


@pytest.mark.parametrize("command", FILE_COMMANDS)
def test_every_file_command_refuses_a_second_name_of_a_users_file(shared, command, capsys):
    """The hard-link route for every command that writes a file the user names, not only the
    vf-report route the attack found: the planted name is refused and the user's file kept."""
    planted = shared.root / "planted-second-name"
    os.link(shared.victim_file, planted)
    main, argv = FILE_COMMANDS[command](shared, planted)
    assert main(argv) == 2
    assert "more than one name" in capsys.readouterr().err.replace("\n", "")
    assert shared.victim_file.read_text() == "the user's own file\n"


def test_a_directory_the_user_trusts_may_be_another_users_but_a_link_there_is_still_refused(
    shared, monkeypatch, capsys
):
    """``VF_TRUSTED_DIRS`` (git's ``safe.directory``): a team's shared project dir, or as root a
    checkout mounted into a container, is another user's by design. Named there, paths under
    it are written; a link planted there and a directory anyone may change are still refused,
    and a directory not named stays refused, its message naming the variable."""
    out = shared.theirs / "data"
    assert vf_data([str(shared.run), "-o", str(out)]) == 2
    assert "add it to VF_TRUSTED_DIRS" in capsys.readouterr().err.replace("\n", "")
    assert not out.exists()

    monkeypatch.setenv("VF_TRUSTED_DIRS", os.pathsep.join(["relative/ignored", str(shared.theirs)]))
    assert vf_data([str(shared.run), "-o", str(out)]) == 0
    import datasets

    assert datasets.load_dataset(str(out), split="train").num_rows == 1
    assert vf_report([str(shared.run), "-o", str(shared.theirs / "report.html")]) == 0
    assert "<html" in (shared.theirs / "report.html").read_text().lower()
    capsys.readouterr()

    before = snapshot(shared)
    assert vf_data([str(shared.run), "-o", str(shared.theirs / "dir-link")]) == 2
    assert "is not a directory of its own" in capsys.readouterr().err.replace("\n", "")
    assert vf_report([str(shared.run), "-o", str(shared.theirs / "file-link")]) == 2
    assert "is a link or not a regular file" in capsys.readouterr().err.replace("\n", "")
    assert vf_data([str(shared.run), "-o", str(shared.root / "open" / "new")]) == 2
    assert "may be changed by anyone" in capsys.readouterr().err.replace("\n", "")
    assert snapshot(shared) == before
    assert shared.victim_file.read_text() == "the user's own file\n"
