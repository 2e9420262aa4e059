"""``python -m verifiers.processes.die_with_parent [--kill] CMD...``: run CMD, killed (SIGTERM, or
SIGKILL with ``--kill``) when its parent dies, however it dies.

The trainer and vf-eval start servers as children; if the parent is SIGKILLed or crashes, a
server left running would hold its port, its memory and (vLLM) a GPU. Linux's parent-death
signal survives ``exec``, so this sets it and then becomes CMD (same pid, no extra process).
Elsewhere it just runs CMD.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15


def arm_parent_death_signal(parent_pid: int, sig: int = signal.SIGTERM) -> bool:
    """Have Linux send ``sig`` to this process when its parent dies (it survives ``exec``);
    False when ``parent_pid`` is already gone, so the caller can stop at once."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    return os.getppid() == parent_pid


def name_process(name: str) -> None:
    """Give this process ``name`` (at most 15 bytes) as its command name, what ``ps``, ``top``
    and ``psutil.Process.name()`` show (Linux; elsewhere nothing)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def guarded(command: list[str], *, kill: bool = False) -> tuple[list[str], dict[str, str]]:
    """``command`` run through this module, as this process's child: its argv, and the
    environment entries to add (the parent's pid, so a parent that dies before the child starts
    is noticed). ``kill``: SIGKILL instead of SIGTERM, for a child that must stop at once."""
    flags = ["--kill"] if kill else []
    argv = [sys.executable, "-m", "verifiers.processes.die_with_parent", *flags, "--", *command]
    return argv, {"VF_PARENT_PID": str(os.getpid())}


def main() -> None:
    command = sys.argv[1:]
    kill = command[:1] == ["--kill"]
    command = command[1:] if kill else command
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise SystemExit(
            "usage: python -m verifiers.processes.die_with_parent [--kill] [--] CMD [ARGS...]"
        )
    parent = int(os.environ.get("VF_PARENT_PID", os.getppid()))
    sig = signal.SIGKILL if kill else signal.SIGTERM
    if not arm_parent_death_signal(parent, sig):  # the parent died before the signal was armed
        raise SystemExit(1)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
