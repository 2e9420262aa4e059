"""One run per output directory: vf-rl and vf-sft hold ``OUTPUT_DIR/.vf-run.lock`` while they run.

An exclusive ``flock`` on a file only the run's owner can open (``verifiers.processes.lock_file``:
no other user can take it, and NFS carries it across hosts), held until the process ends however
it ends (the kernel drops it on SIGKILL too). So a second run or a
``--resume`` started while the first still goes is refused instead of mixing with it, and what the
holder finds staged in ``checkpoints/`` was left by a run that was killed, on any machine or boot.
A filesystem that cannot lock (or one mounted with host-local locks) keeps none of these promises:
the run goes on, told so, and removes only what a dead process of its own machine left.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from verifiers.processes.lock_file import open_lock_file, still_named
from verifiers.processes.own_dir import foreign_above_problem, foreign_dir_problem

RUN_LOCK = ".vf-run.lock"
_held: list[int] = []  # the descriptor this process holds, closed in forked children


def _close_in_child() -> None:
    """A child forked without exec (multiprocessing's default on Linux) would otherwise keep the
    lock after the run died, and the directory would read as in use for the child's life."""
    while _held:
        with suppress(OSError):
            os.close(_held.pop())


os.register_at_fork(after_in_child=_close_in_child)


@dataclass(frozen=True)
class RunDirHold:
    held: bool  # this process holds the directory: no other run is writing to it
    problem: str | None = None  # why the run cannot use it
    note: str | None = None  # said, and the run goes on (a filesystem without locks)


@contextmanager
def run_dir_lock(out: Path) -> Iterator[RunDirHold]:
    """Hold ``out`` (made if missing) for one run. A directory this made and left holding only
    the lock file is removed again, while still held."""
    made = not out.exists()
    while True:
        try:
            problem = foreign_above_problem(out)  # before anything is made under it
            if problem is None:
                out.mkdir(mode=0o700 if made else 0o777, parents=True, exist_ok=True)
                problem = foreign_dir_problem(out, "--output_dir")
            if problem:
                yield RunDirHold(False, problem)
                return
            fd = open_lock_file(out / RUN_LOCK)
        except OSError as exc:
            yield RunDirHold(False, f"cannot use {out} as the output dir: {exc}")
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            yield RunDirHold(
                False,
                f"{out} is in use by a run that is still going (vf-rl or vf-sft): wait for it to "
                "end, stop it, or choose another --output_dir",
            )
            return
        except OSError as exc:
            os.close(fd)
            yield RunDirHold(
                False, note=f"{out} cannot be locked ({exc}): a second run into it is not refused"
            )
            return
        if still_named(fd, out / RUN_LOCK):
            break
        os.close(fd)  # locked a lock file that its holder removed as it left: take the new one
    _held.append(fd)
    try:
        yield RunDirHold(True)
        if made and os.listdir(out) == [RUN_LOCK]:
            with suppress(OSError):
                os.unlink(out / RUN_LOCK)
                out.rmdir()
    finally:
        _held.remove(fd)
        os.close(fd)
