"""What the sandbox tests share: which modes this machine has, and the host's view of sandbox
processes (by uid or worker path), so a test can assert that none outlives it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from verifiers.sandbox import SandboxLimits
from verifiers.sandbox.base import SandboxUnavailableError
from verifiers.sandbox.provider import landlock_abi, probe_mode
from verifiers.testing import Reply


def available_modes() -> list:
    modes = []
    try:
        probe_mode()
        modes.append("bwrap")
    except SandboxUnavailableError:
        pass
    try:
        from verifiers.sandbox.local import LocalSandbox

        LocalSandbox("landlock", SandboxLimits())
        modes.append("landlock")
    except SandboxUnavailableError as exc:
        modes.append(pytest.param("landlock", marks=pytest.mark.skip(reason=str(exc))))
    except OSError:
        modes.append(
            pytest.param(
                "landlock", marks=pytest.mark.skip(reason=f"no Landlock (ABI {landlock_abi()})")
            )
        )
    return modes


def sandbox_pids() -> list[int]:
    """Host pids of sandbox workers and anything they started (found by uid or worker path),
    except those of the other test workers running beside this one (``pytest -n``): theirs
    descend from them, while a process that escaped one of ours is re-parented and stays
    counted."""
    parents = {}
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            uid = os.stat(f"/proc/{entry}").st_uid
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
        if (
            (b"worker.py" in cmdline and b"verifiers" in cmdline)
            or b"/opt/vf/worker.py" in cmdline
            or uid >= 100_000
        ):
            found.append(int(entry))
    others = _other_test_workers(parents)
    return [pid for pid in found if not _descends(pid, others, parents)]


def _other_test_workers(parents: dict[int, int]) -> set[int]:
    """The xdist workers other than this one: this worker's siblings."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return set()
    me = os.getpid()
    return {pid for pid, parent in parents.items() if parent == parents.get(me) and pid != me}


def _descends(pid: int, ancestors: set[int], parents: dict[int, int]) -> bool:
    seen = 0
    while pid in parents and seen < 64:
        if pid in ancestors:
            return True
        pid, seen = parents[pid], seen + 1
    return False


def named(pids: Iterable[int], name: str) -> list[int]:
    """The processes among ``pids`` whose command is ``name`` (one that exits meanwhile is not)."""
    found = []
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == name:
                found.append(pid)
        except OSError:
            continue
    return found


def wait_until_no_sandboxes(timeout: float = 30.0) -> list[int]:
    """The sandbox processes still running once none are, or ``timeout`` seconds passed (a
    bound on a hang: a sandbox killed on a loaded machine may take a while to be reaped)."""
    deadline = time.monotonic() + timeout
    while (pids := sandbox_pids()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


async def still_works(box) -> None:
    result = await box.run_python("print(6 * 7)")
    assert result.stdout == "42\n" and result.exit_code == 0


def python_policy(*snippets):
    def policy(request):
        done = sum(1 for m in request["messages"] if m["role"] == "tool")
        if done < len(snippets):
            return Reply(tool_calls=[Reply.tool_call("python", {"code": snippets[done]})])
        return "finished"

    return policy
