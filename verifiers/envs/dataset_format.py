"""Turn dataset rows into rollout inputs: ``prompt``, ``answer``, ``info``, ``task``, ``example_id``.

Validation happens here, once, so a malformed row is reported by number before any model call.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from verifiers.errors import DatasetError

VALID_ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})


def to_rows(dataset: Any) -> list[dict[str, Any]]:
    """Rows of a ``datasets.Dataset``, a list of dicts, or a dict of columns."""
    if hasattr(dataset, "to_list") and hasattr(dataset, "column_names"):
        return dataset.to_list()
    if isinstance(dataset, dict):
        columns = list(dataset)
        lengths = {len(dataset[c]) for c in columns}
        if len(lengths) > 1:
            raise DatasetError(
                f"dataset columns have different lengths: { {c: len(dataset[c]) for c in columns} }"
            )
        n = lengths.pop() if lengths else 0
        return [{c: dataset[c][i] for c in columns} for i in range(n)]
    if isinstance(dataset, Iterable) and not isinstance(dataset, str | bytes):
        rows = list(dataset)
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise DatasetError(
                    f"dataset row {i} is a {type(row).__name__}, expected a dict of columns"
                )
        return rows
    raise DatasetError(
        f"cannot use a {type(dataset).__name__} as a dataset; pass a datasets.Dataset or a list of dicts"
    )


def format_rows(
    rows: list[dict[str, Any]],
    *,
    message_type: str,
    system_prompt: str | None,
    few_shot: list[dict[str, Any]] | None,
    question_key: str = "question",
    answer_key: str = "answer",
    default_task: str | None = "default",
) -> list[dict[str, Any]]:
    """Validated rollout inputs; ``default_task=None`` leaves rows without a ``task`` as they
    are (releases where ``task`` is a payload, not a label)."""
    if not rows:
        raise DatasetError("the dataset is empty")
    if "prompt" not in rows[0] and question_key not in rows[0]:
        raise DatasetError(
            f"dataset rows need a 'prompt' or a '{question_key}' column; row 0 has {sorted(rows[0])}"
        )
    formatted = []
    for i, row in enumerate(rows):
        out = dict(row)
        out["prompt"] = _prompt(row, i, message_type, system_prompt, few_shot, question_key)
        if answer_key != "answer" and answer_key in row:
            out["answer"] = row[answer_key]
        answer = out.get("answer")
        out["answer"] = "" if answer is None else answer
        out["info"] = _info(row.get("info"), i)
        if default_task is not None:
            out["task"] = row.get("task") or default_task
        formatted.append(out)
    _assign_example_ids(formatted)
    return formatted


def _assign_example_ids(formatted: list[dict[str, Any]]) -> None:
    """Integer ``example_id``s: kept when the column holds integers, else numbered from 0 (a
    non-integer id column is kept as ``src_id``, as the classic SDK does)."""
    values = [r.get("example_id") for r in formatted]
    if all(v is None for v in values):
        for i, row in enumerate(formatted):
            row["example_id"] = i
        return
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        for i, row in enumerate(formatted):
            if "example_id" in row and row["example_id"] is not None:
                row["src_id"] = row["example_id"]
            row["example_id"] = i
        return
    ids = [r["example_id"] for r in formatted]
    if len(set(ids)) != len(ids):
        seen: set[int] = set()
        for dup in ids:
            if dup in seen:
                break
            seen.add(dup)
        raise DatasetError(f"example_id {dup} appears more than once; example ids must be unique")


def _prompt(row, i, message_type, system_prompt, few_shot, question_key):
    prompt = row.get("prompt")
    if prompt is None:
        question = row.get(question_key)
        if question is None:
            raise DatasetError(f"dataset row {i} has neither 'prompt' nor '{question_key}'")
        if not isinstance(question, str):
            raise DatasetError(
                f"dataset row {i}: '{question_key}' must be a string, got {type(question).__name__}"
            )
        if message_type == "completion":
            return (system_prompt + "\n\n" if system_prompt else "") + question
        messages: list[dict[str, Any]] = []
        if system_prompt:
            messages.append({"role": "system", "content": system_prompt})
        messages.extend(few_shot or [])
        messages.append({"role": "user", "content": question})
        return messages
    if message_type == "completion":
        if not isinstance(prompt, str):
            raise DatasetError(
                f"dataset row {i}: completion environments need a string prompt, got {type(prompt).__name__}"
            )
        return prompt
    if isinstance(prompt, str):
        raise DatasetError(
            f"dataset row {i}: 'prompt' is a string but this is a chat environment; "
            "use a list of {'role', 'content'} messages, or put the text in a 'question' column"
        )
    if not isinstance(prompt, list) or not prompt:
        raise DatasetError(f"dataset row {i}: 'prompt' must be a non-empty list of messages")
    cleaned = []
    for j, message in enumerate(prompt):
        if not isinstance(message, dict) or "role" not in message:
            raise DatasetError(
                f"dataset row {i}, message {j}: expected a dict with a 'role', got {message!r:.80}"
            )
        if message["role"] not in VALID_ROLES:
            raise DatasetError(f"dataset row {i}, message {j}: unknown role {message['role']!r}")
        # Arrow fills absent struct fields with None; drop them so messages round-trip unchanged.
        cleaned.append({k: v for k, v in message.items() if v is not None or k == "content"})
    if system_prompt and cleaned[0].get("role") != "system":
        cleaned.insert(0, {"role": "system", "content": system_prompt})
    return cleaned


def _info(info: Any, i: int) -> dict[str, Any]:
    if info is None:
        return {}
    if isinstance(info, str):
        try:
            info = json.loads(info) if info.strip() else {}
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"dataset row {i}: 'info' is a string that is not JSON ({exc})"
            ) from exc
    if not isinstance(info, dict):
        raise DatasetError(f"dataset row {i}: 'info' must be a dict, got {type(info).__name__}")
    return info
