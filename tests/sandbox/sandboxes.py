"""What the sandbox tests share: which modes this machine has, and the host's view of sandbox
processes (by uid or worker path), so a test can assert that none outlives it."""

from __future__ import annotations

import os
import time
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
    """Host pids of sandbox workers and anything they started (found by uid or worker path)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            uid = os.stat(f"/proc/{entry}").st_uid
        except OSError:
            continue
        if (
            (b"worker.py" in cmdline and b"verifiers" in cmdline)
            or b"/opt/vf/worker.py" in cmdline
            or uid >= 100_000
        ):
            found.append(int(entry))
    return found


def wait_until_no_sandboxes(timeout: float = 5.0) -> list[int]:
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
