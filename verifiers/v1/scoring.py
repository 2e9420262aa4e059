"""Answer checks that tasksets share: boxed answers, math equivalence, program output
compared with a tolerance, pytest outcomes read from its report, a judge's verdict."""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verifiers.v1.trace import Trace

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
PYTEST_OUTCOMES = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
_WITH_REASON = ("FAILED", "ERROR", "XFAIL", "XPASS")
_VERDICT = re.compile(
    r"(?:^|\n)\s*(?:FINAL\s+JUDGMENT|FINAL\s+ANSWER|FINAL\s+VERDICT|JUDGMENT|VERDICT|ANSWER)"
    r"\s*(?:IS\s*)?[:\-]?\s*"
)


def extract_boxed_answer(text: str, strict: bool = False) -> str:
    """The content of the last ``\\boxed{...}`` (nested braces balanced); without one, the
    whole text (``strict``: "")."""
    start = text.rfind("\\boxed{")
    if start == -1:
        return "" if strict else text
    depth = 0
    begin = start + len("\\boxed{")
    for i in range(begin, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            if depth == 0:
                return text[begin:i]
            depth -= 1
    return "" if strict else text


def _after_thinking(text: str | None) -> str | None:
    """The text after a closed ``<think>`` block (None for an unclosed one or no text)."""
    if not text or ("<think>" in text and "</think>" not in text):
        return None
    return text.rsplit("</think>", 1)[-1]


def parse_judge_choice(content: str | None, choices: Sequence[str] = ("A", "B", "C")) -> str | None:
    """The choice a judge's reply settles on: the first after a verdict marker ("Final
    judgment: B"), else the last one mentioned; a boxed answer is read first."""
    text = _after_thinking(content)
    if text is None:
        return None
    text = text.strip()
    text = extract_boxed_answer(text, strict=True).strip() or text
    upper = text.upper()
    by_upper = {c.upper(): c for c in choices}
    choice = re.compile(rf"(?<!\w)({'|'.join(re.escape(c) for c in by_upper)})(?!\w)")
    verdict = _VERDICT.search(upper)
    if verdict:
        match = choice.search(upper, verdict.end())
        return by_upper[match.group(1)] if match else None
    found = choice.findall(upper)
    return by_upper[found[-1]] if found else None


def verify_boxed_math_answer(
    response: str | None, answer: str, *, timeout_seconds: int = 5
) -> float:
    """1.0 when the response's boxed answer is mathematically equal to ``answer`` (math-verify),
    else 0.0 (unparsable answers included)."""
    text = _after_thinking(response)
    if text is None:
        return 0.0
    prediction = extract_boxed_answer(text, strict=True).strip()
    gold = (extract_boxed_answer(answer, strict=True) or answer).strip()
    if not prediction or not gold:
        return 0.0
    from math_verify import parse, verify

    try:
        return float(
            verify(
                parse(f"\\boxed{{{gold}}}", parsing_timeout=timeout_seconds),
                parse(f"\\boxed{{{prediction}}}", parsing_timeout=timeout_seconds),
                timeout_seconds=timeout_seconds,
            )
        )
    except Exception:  # math-verify raises on malformed input; such an answer scores 0
        return 0.0


def compare_stdout_results(exec_stdout: str, expected: str, *, tolerance: float = 1e-3) -> bool:
    """Whether a program's output matches: exactly, line by line, token by token, or as
    numbers each within ``tolerance``."""
    if exec_stdout.strip() == expected.strip():
        return True
    got = [t for line in exec_stdout.splitlines() for t in line.split()]
    want = [t for line in expected.splitlines() for t in line.split()]
    if got == want:
        return True
    if len(got) != len(want) or not got:
        return False
    try:
        pairs = [(Decimal(a), Decimal(b)) for a, b in zip(got, want, strict=True)]
    except (InvalidOperation, ValueError):
        return False
    limit = Decimal(str(tolerance))
    return all(a.is_finite() and b.is_finite() and abs(a - b) <= limit for a, b in pairs)


def _node_id(outcome: str, rest: str) -> str:
    """The node id of a pytest summary row (a failure row's " - reason" cut off, keeping
    " - " inside a parametrize id's brackets)."""
    if outcome not in _WITH_REASON or " - " not in rest:
        return rest.rstrip()
    parts = rest.split(" - ")
    for i in range(1, len(parts)):
        candidate = " - ".join(parts[:i])
        if candidate.count("[") == candidate.count("]"):
            return candidate.rstrip()
    return rest.rstrip()


def parse_pytest_outcomes(output: str | None) -> dict[str, str]:
    """``{node id: outcome}`` from pytest's ``-rA``/verbose rows (ANSI colours ignored)."""
    outcomes: dict[str, str] = {}
    for line in _ANSI.sub("", output or "").splitlines():
        parts = line.strip().split(maxsplit=1)
        if len(parts) != 2 or parts[0] not in PYTEST_OUTCOMES or parts[1].startswith("["):
            continue
        outcomes[_node_id(parts[0], parts[1])] = parts[0]
    return outcomes


async def read_answer_file_or_last_reply(runtime: Any, path: str, trace: Trace) -> str:
    """The answer the agent wrote to ``path`` in its runtime, else its last reply."""
    from verifiers.v1.errors import SandboxError

    try:
        answer = (await runtime.read(path)).decode(errors="replace").strip()
    except (OSError, SandboxError):
        answer = ""
    return answer or trace.last_reply
