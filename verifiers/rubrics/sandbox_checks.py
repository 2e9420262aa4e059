"""Graders for untrusted code: checks run in a fresh sandbox, judged in this process.

A sandbox is told what to *evaluate* (setup code, then one expression per check) and reports
only what each expression returned, as JSON, or raised. Whether that is right is decided here,
against expected values that never enter the sandbox. So the classic ways of gaming a test
runner buy nothing: printing "all tests passed" or forged result lines, patching ``json`` or
``print``, exiting early, writing report files, or returning an object whose ``__eq__`` always
says yes (only JSON comes back). Forging a result means knowing the expected value, which is
solving the check. Each grading gets a new sandbox, so nothing left by an earlier run (or by
the model's own episode sandbox, a different one) is there.

Used by the code-functions and repo-bugfix example environments::

    checks = SandboxChecks()
    run = await checks.run(setup=model_code, expressions=["add(1, 2)", "add(-1, 1)"])
    report = run.judge([3, 0])   # {"passed": [True, False], "errors": [...], "timed_out": False}
    await checks.close()         # when the run ends (``Environment.end_run``)
"""

from __future__ import annotations

import json
import math
import secrets
from dataclasses import dataclass
from typing import Any

from verifiers.sandbox.base import SandboxLimits
from verifiers.sandbox.provider import LocalSandboxProvider

HARNESS = """
import json, signal, sys
_out = sys.__stdout__
def _emit(i, kind, value):
    _out.write({nonce!r} + " " + json.dumps([i, kind, value], allow_nan=False) + "\\n")
    _out.flush()
def _alarm(signum, frame):
    raise TimeoutError("the check took longer than {seconds}s")
signal.signal(signal.SIGALRM, _alarm)
_ns = {{"__name__": "__checks__"}}
try:
    exec(compile({setup!r}, "setup.py", "exec"), _ns)
except BaseException as exc:
    _emit(-1, "error", f"{{type(exc).__name__}}: {{exc}}"[:300])
    raise SystemExit(0)
for _i, _expr in enumerate(json.loads({expressions!r})):
    signal.alarm({seconds})
    try:
        _emit(_i, "value", eval(_expr, _ns))
    except BaseException as exc:
        _emit(_i, "error", f"{{type(exc).__name__}}: {{exc}}"[:300])
    finally:
        signal.alarm(0)
"""


def harness_script(setup: str, expressions: list[str], nonce: str, seconds: int) -> str:
    """The program the grading sandbox runs: setup code and the check expressions; nothing
    about the expected values."""
    return HARNESS.format(
        nonce=nonce, setup=setup, expressions=json.dumps(expressions), seconds=seconds
    )


def same(expected: Any, actual: Any) -> bool:
    """JSON values equal as a test's ``==`` would say, but strictly typed: a bool is not a
    number, ``None`` is only ``None``; numbers compare with a 1e-9 tolerance."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, int | float):
        return isinstance(actual, int | float) and math.isclose(
            expected, actual, rel_tol=1e-9, abs_tol=1e-9
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(same(e, a) for e, a in zip(expected, actual, strict=True))
        )
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and actual.keys() == expected.keys()
            and all(same(v, actual[k]) for k, v in expected.items())
        )
    return type(expected) is type(actual) and expected == actual


def read_reports(stdout: str, nonce: str, count: int) -> dict[int, tuple[str, Any]]:
    """The harness's result lines by check index (-1: setup failed); an index reported twice
    counts as not reported (only forged output does that)."""
    reports: dict[int, tuple[str, Any]] = {}
    doubled: set[int] = set()
    for line in stdout.splitlines():
        if not line.startswith(nonce + " "):
            continue
        try:
            index, kind, value = json.loads(line[len(nonce) + 1 :])
        except (ValueError, TypeError):
            continue
        if not isinstance(index, int) or not -1 <= index < count:
            continue
        if index in reports:
            doubled.add(index)
        reports[index] = (kind, value)
    for index in doubled:
        reports.pop(index)
    return reports


@dataclass
class CheckRun:
    """What one grading run reported: per check ``("value", v)``, ``("error", text)`` or
    ``("missing", None)``, and whether the sandbox killed it at its time limit."""

    results: list[tuple[str, Any]]
    setup_error: str | None = None
    timed_out: bool = False

    def judge(self, expected: list[Any]) -> dict[str, Any]:
        """``{"passed": [bool per check], "errors": [...first few], "timed_out": bool}``."""
        errors = [f"setup: {self.setup_error}"] if self.setup_error else []
        passed = []
        for i, want in enumerate(expected):
            kind, value = self.results[i]
            passed.append(kind == "value" and same(want, value))
            if kind == "error" and len(errors) < 3:
                errors.append(f"check {i}: {value}")
        if self.timed_out:
            errors.append("the run was killed at the time limit")
        return {"passed": passed, "errors": errors, "timed_out": self.timed_out}


class SandboxChecks:
    """Runs checks in a new sandbox per call (``LocalSandboxProvider``; bwrap or landlock)."""

    def __init__(
        self,
        sandbox_mode: str = "auto",
        limits: SandboxLimits | None = None,
        seconds_per_check: int = 2,
    ) -> None:
        if sandbox_mode == "unsafe":
            raise ValueError(
                "checks run untrusted code: use sandbox_mode auto, bwrap or landlock"
            )
        self.sandbox_mode = sandbox_mode
        self.limits = limits or SandboxLimits(wall_time_s=12, cpu_time_s=12, memory_mb=256)
        self.seconds_per_check = seconds_per_check
        self._provider: LocalSandboxProvider | None = None

    @property
    def provider(self) -> LocalSandboxProvider:
        if self._provider is None:
            # no warm pool: a pooled sandbox started by the last check of a run outlived it
            self._provider = LocalSandboxProvider(
                mode=self.sandbox_mode, limits=self.limits, pool_size=0
            )
        return self._provider

    async def run(
        self, setup: str, expressions: list[str], files: dict[str, str] | None = None
    ) -> CheckRun:
        """Write ``files`` into a fresh sandbox's work dir, run ``setup`` there, then evaluate
        each expression in setup's namespace, one at a time, each with its own time limit."""
        nonce = secrets.token_hex(16)
        sandbox = await self.provider.create(self.limits)
        try:
            for path, text in (files or {}).items():
                await sandbox.upload(path, text.encode())
            result = await sandbox.run_python(
                harness_script(setup, expressions, nonce, self.seconds_per_check)
            )
        finally:
            await sandbox.destroy()
        reports = read_reports(result.stdout, nonce, len(expressions))
        setup_error = reports.pop(-1, (None, None))[1]
        return CheckRun(
            results=[reports.get(i, ("missing", None)) for i in range(len(expressions))],
            setup_error=None if setup_error is None else str(setup_error),
            timed_out=result.timed_out,
        )

    async def close(self) -> None:
        if self._provider is not None:
            await self._provider.close()
            self._provider = None
