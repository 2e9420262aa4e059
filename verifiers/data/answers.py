"""Answer extraction with exactly the classic semantics (rewards depend on every character)."""

from __future__ import annotations


def extract_boxed_answer(text: str, strict: bool = False) -> str:
    """The content of the last ``\\boxed{...}`` (nested braces respected, not stripped); when
    there is none or its braces never close, the text itself, or ``""`` with ``strict`` (for
    rewards where the format counts)."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return "" if strict else text
    begin = start + len("\\boxed{")
    depth = 1
    for i in range(begin, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[begin:i]
    return "" if strict else text


def extract_hash_answer(text: str) -> str:
    """GSM8K-style answers: what follows the first ``####``, stripped; the text when there is none."""
    if "####" not in text:
        return text
    return text.split("####")[1].strip()


def strip_non_numeric(text: str) -> str:
    """Only the digits and dots of ``text``."""
    return "".join(c for c in text if c.isdigit() or c == ".")
