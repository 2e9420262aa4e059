"""Answer extraction helpers and example datasets (classic ``verifiers.utils.data_utils`` path)."""

from __future__ import annotations

from typing import Any

BOXED_COMMANDS = ("\\boxed", "\\fbox")

# The classic prompts, character for character (environments' requests must not change).
THINK_BOXED_SYSTEM_PROMPT = (
    "Think step-by-step inside <think>...</think> tags.     "
    "Then, give your final answer inside \\boxed{}."
)
BOXED_SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."


def extract_boxed_answer(text: str) -> str:
    """The content of the last ``\\boxed{...}`` (nested braces respected); the text itself if none."""
    if not text:
        return text
    start = -1
    for command in BOXED_COMMANDS:
        start = max(start, text.rfind(command + "{"))
    if start < 0:
        return text
    i = text.index("{", start) + 1
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j].strip()
    return text[i:].strip()


def extract_hash_answer(text: str) -> str | None:
    """GSM8K-style answers: what follows ``####``, commas removed; None when there is none."""
    if "####" not in text:
        return None
    return text.split("####")[-1].strip().replace(",", "")


def strip_non_numeric(text: str) -> str:
    return "".join(c for c in text if c.isdigit() or c in ".-")


def load_example_dataset(
    name: str = "gsm8k", split: str | None = None, n: int | None = None, **kwargs: Any
):
    """Load a well-known dataset from the Hugging Face Hub, formatted as question/answer rows.

    Offline (no hub access), this fails with a message naming what to use instead.
    """
    try:
        from datasets import load_dataset

        if name == "gsm8k":
            ds = load_dataset("openai/gsm8k", "main", split=split or "train", **kwargs)
            ds = ds.map(
                lambda x: {"question": x["question"], "answer": extract_hash_answer(x["answer"])}
            )
        else:
            ds = load_dataset(name, split=split or "train", **kwargs)
    except Exception as exc:  # the hub is unreachable, or the name is unknown
        raise RuntimeError(
            f"load_example_dataset({name!r}) needs the Hugging Face Hub, which failed: "
            f"{type(exc).__name__}: {str(exc)[:200]}. Offline, install an environment that ships its data "
            "(e.g. `vf-install gsm8k-mini` from environments/) or build one with "
            "`datasets.Dataset.from_list([{'question': ..., 'answer': ...}])`."
        ) from exc
    if n is not None and n > 0:
        ds = ds.select(range(min(n, len(ds))))
    return ds
