"""A run's records on disk, as written line by line (metrics.jsonl, eval.jsonl, samples.jsonl).

Lines are appended as steps finish, so a killed run can leave a torn last line: it is skipped.
Readers here need no torch (vf-report reads runs with the SDK alone).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of ``path`` (none if it is missing; a torn line is skipped)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


def run_records(output_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A run's per-step records and held-out evals."""
    return read_jsonl(output_dir / "metrics.jsonl"), read_jsonl(output_dir / "eval.jsonl")


def records_to_plot(
    output_dir: Path,
) -> tuple[Any, list[dict[str, Any]], list[dict[str, Any]]] | None:
    """pyplot and a run's records, what each run's ``metrics.png`` is drawn from; None when
    there is nothing to draw (no matplotlib, or no step recorded yet)."""
    from verifiers.results.style import pyplot

    plt = pyplot()
    if plt is None:
        return None
    history, evals = run_records(output_dir)
    if not history:
        return None
    return plt, history, evals
