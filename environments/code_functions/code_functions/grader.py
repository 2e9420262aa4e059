"""Hidden tests, run in a fresh sandbox of their own and judged here.

The sandbox only ever sees the model's code, the function's name and the test *inputs*. It
reports what each call returned (as JSON) or raised; whether that is right is decided in this
process against expected outputs that never leave it. So the classic ways of gaming a test
runner buy nothing: printing "all tests passed" or forged result lines, patching ``json`` or
``print``, exiting early, editing files, or returning an object whose ``__eq__`` says yes (only
JSON comes back). Forging a result means knowing the expected value, which is solving the test.
The episode's own sandbox (the model's REPL) is a different one and never holds the tests.
"""

from __future__ import annotations

import json
import math
import secrets
from typing import Any

from verifiers.sandbox import SandboxLimits
from verifiers.sandbox.local import LocalSandboxProvider

PER_TEST_SECONDS = 2
LIMITS = SandboxLimits(wall_time_s=12, cpu_time_s=12, memory_mb=256)

HARNESS = """
import json, signal, sys
_out = sys.__stdout__
def _emit(i, kind, value):
    _out.write({nonce!r} + " " + json.dumps([i, kind, value], allow_nan=False) + "\\n")
    _out.flush()
def _alarm(signum, frame):
    raise TimeoutError("the test took longer than {seconds}s")
signal.signal(signal.SIGALRM, _alarm)
try:
    _ns = {{"__name__": "solution"}}
    exec(compile({source!r}, "solution.py", "exec"), _ns)
    _fn = _ns[{entry!r}]
except BaseException as exc:
    _emit(-1, "error", f"{{type(exc).__name__}}: {{exc}}"[:300])
    raise SystemExit(0)
for _i, _args in enumerate(json.loads({cases!r})):
    signal.alarm({seconds})
    try:
        _emit(_i, "value", _fn(*_args))
    except BaseException as exc:
        _emit(_i, "error", f"{{type(exc).__name__}}: {{exc}}"[:300])
    finally:
        signal.alarm(0)
"""


def harness_script(source: str, entry: str, cases: list[list[Any]], nonce: str) -> str:
    """The program the grading sandbox runs: the model's code, the entry point's name and the
    test inputs; nothing about the expected outputs."""
    return HARNESS.format(
        nonce=nonce, source=source, entry=entry, cases=json.dumps(cases), seconds=PER_TEST_SECONDS
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
    """The harness's result lines by test index; an index reported twice counts as not reported
    (only forged output does that)."""
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


class HiddenTestGrader:
    """Runs one solution against its hidden tests per call, each in a new sandbox."""

    def __init__(self, sandbox_mode: str = "auto") -> None:
        self.sandbox_mode = sandbox_mode
        self._provider: LocalSandboxProvider | None = None

    async def grade(
        self, source: str, entry: str, cases: list[list[Any]], expected: list[Any]
    ) -> dict[str, Any]:
        """``{"passed": [bool per test], "errors": [...], "timed_out": bool}``."""
        if not source.strip():
            return {"passed": [False] * len(cases), "errors": ["no code in the reply"], "timed_out": False}
        if self._provider is None:
            self._provider = LocalSandboxProvider(mode=self.sandbox_mode, limits=LIMITS, pool_size=1)
        nonce = secrets.token_hex(16)
        sandbox = await self._provider.create(LIMITS)
        try:
            result = await sandbox.run_python(harness_script(source, entry, cases, nonce))
        finally:
            await sandbox.destroy()
        reports = read_reports(result.stdout, nonce, len(cases))
        errors = [str(reports[-1][1])] if -1 in reports else []
        passed = []
        for i, want in enumerate(expected):
            kind, value = reports.get(i, ("missing", None))
            passed.append(kind == "value" and same(want, value))
            if kind == "error" and len(errors) < 3:
                errors.append(f"test {i}: {value}")
        if result.timed_out:
            errors.append("the run was killed at the time limit")
        return {"passed": passed, "errors": errors, "timed_out": result.timed_out}

    async def close(self) -> None:
        if self._provider is not None:
            await self._provider.close()
            self._provider = None
