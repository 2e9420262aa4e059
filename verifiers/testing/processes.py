"""Process-tree checks for tests that a run, a server or a sandbox leaves nothing running
(Linux ``/proc``): what ``ps`` would show, read without it."""

from __future__ import annotations

from pathlib import Path


def _stat_fields(pid: int) -> list[str]:
    # the command name may hold spaces and parentheses: the fields start after the last ")"
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def parent_of(pid: int) -> int:
    return int(_stat_fields(pid)[1])


def alive(pid: int) -> bool:
    """Running: neither gone nor a zombie waiting for its parent to reap it."""
    try:
        return _stat_fields(pid)[0] != "Z"
    except (OSError, IndexError):
        return False


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if parent_of(int(entry.name)) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue  # exited while being read
    return found


def descendants(pid: int) -> list[int]:
    """Children, their children, and so on (a snapshot: a process may start or end meanwhile)."""
    return [d for child in children(pid) for d in (child, *descendants(child))]
