"""``report.html``: an evaluation run (or several, side by side) as one self-contained page.

Everything the page needs is in the file: no network, no CDN. The run's metadata, the reward
distribution (an inline SVG), metrics, pass@k, errors by type, token usage and timing are
rendered by Jinja2 with autoescaping; the rollouts travel as JSON inside a
``<script type="application/json">`` block (``<`` escaped, so no model output can close it) and
are drawn by a few lines of dependency-free JavaScript that only ever sets ``textContent``: a
page of 50 at a time, filtered by error and minimum reward, sorted by reward or example. Model
output, README text, env args and filenames are untrusted and are never interpreted as HTML.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jinja2

from verifiers.results.writer import read_rows

TEMPLATE = Path(__file__).with_name("report.html.j2")
BINS = 20


META_DEFAULTS: dict[str, Any] = {
    "env_id": None,
    "env_version": None,
    "env_content_hash": None,
    "env_args": {},
    "model": None,
    "base_url": None,
    "sampling_args": {},
    "verifiers_version": None,
    "status": None,
    "started_at": None,
    "duration_s": 0.0,
    "run_id": None,
    "summary": {},
}  # metadata.json of older runs may lack some
SUMMARY_DEFAULTS: dict[str, Any] = {
    "num_rollouts": 0,
    "num_examples": 0,
    "num_errors": 0,
    "avg_reward": None,
    "std_reward": None,
    "avg_metrics": {},
    "pass_at_k": {},
    "errors_by_type": {},
    "usage": {"prompt_tokens": 0, "completion_tokens": 0},
}


def load_run(run_dir: Path) -> dict[str, Any]:
    meta = {**META_DEFAULTS, **json.loads((run_dir / "metadata.json").read_text())}
    meta["summary"] = {**SUMMARY_DEFAULTS, **(meta["summary"] or {})}
    meta["summary"]["usage"] = {**SUMMARY_DEFAULTS["usage"], **(meta["summary"]["usage"] or {})}
    rows = (
        list(read_rows(run_dir / "results.jsonl")) if (run_dir / "results.jsonl").exists() else []
    )
    return {"dir": str(run_dir), "meta": meta, "rows": rows}


def finite(value: Any) -> float | None:
    """A reward or metric as a finite number, or None (missing, text, NaN, infinite)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def histogram(values: list[float], bins: int = BINS) -> dict[str, Any]:
    """Counts of the finite values over [min, max] (or [0, 1] when all lie in it), for the
    SVG; ``skipped`` counts the rest (NaN, infinite, not a number)."""
    numbers = [v for v in map(finite, values) if v is not None]
    skipped = len(values) - len(numbers)
    if not numbers:
        return {"counts": [], "low": 0.0, "high": 1.0, "peak": 0, "skipped": skipped}
    low, high = min(numbers), max(numbers)
    if low >= 0.0 and high <= 1.0:
        low, high = 0.0, 1.0
    if math.isclose(low, high):
        low, high = low - 0.5, high + 0.5
    half_span = high / 2 - low / 2  # halves: max - min may overflow a float
    counts = [0] * bins
    for v in numbers:
        counts[min(bins - 1, int((v / 2 - low / 2) / half_span * bins))] += 1
    return {"counts": counts, "low": low, "high": high, "peak": max(counts), "skipped": skipped}


def timing(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Mean and 95th-percentile generation time and mean scoring time per rollout (ms)."""

    def times(key: str) -> list[float]:
        found = (finite(r["timing"].get(key)) for r in rows if isinstance(r.get("timing"), dict))
        return sorted(t for t in found if t is not None)

    generation, scoring = times("generation_ms"), times("scoring_ms")
    return {
        "generation_ms": sum(generation) / len(generation) if generation else None,
        "generation_p95_ms": generation[int(0.95 * (len(generation) - 1))] if generation else None,
        "scoring_ms": sum(scoring) / len(scoring) if scoring else None,
    }


def _rollout(row: dict[str, Any]) -> dict[str, Any]:
    """What the page shows of a rollout (compact keys keep 10,000 rollouts small)."""
    error = row.get("error")
    reward = row.get("reward")
    metrics = row.get("metrics")
    return {
        "e": row.get("example_id"),
        "i": row.get("rollout_index"),
        "r": finite(reward),
        "rs": None if finite(reward) is not None or reward is None else str(reward),
        "m": metrics if isinstance(metrics, dict) else {},
        "x": (error.get("type") if isinstance(error, dict) else str(error)) if error else None,
        "xm": (error.get("message") if isinstance(error, dict) else None) if error else None,
        "a": row.get("answer"),
        "p": _messages(row.get("prompt")),
        "c": _messages(row.get("completion")),
        "t": finite(_field(row, "usage", "completion_tokens")),
        "g": finite(_field(row, "timing", "generation_ms")),
    }


def _field(row: dict[str, Any], section: str, key: str) -> Any:
    part = row.get(section)
    return part.get(key) if isinstance(part, dict) else None


def _messages(value: Any) -> list[dict[str, Any]]:
    """Messages as the page draws them, whatever a row holds: text, a list of messages, of
    strings (completion-style choices) or of anything else (shown as JSON)."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    out: list[dict[str, Any]] = []
    for m in value if isinstance(value, list) else [] if value is None else [value]:
        if not isinstance(m, dict):
            out.append({"role": "", "content": _text(m), "calls": []})
            continue
        # the usual message (text role and content, no tool calls) without a call a field:
        # an 8,000-rollout report spent half its time here, written before vf-eval exits
        role, content, calls = m.get("role") or "", m.get("content") or "", m.get("tool_calls")
        out.append(
            {
                "role": role if isinstance(role, str) else _text(role),
                "content": content if isinstance(content, str) else _text(content),
                "calls": _calls(calls) if calls else [],
            }
        )
    return out


def _calls(calls: Any) -> list[dict[str, Any]]:
    return [
        {"name": _text(f.get("name")), "arguments": f.get("arguments")}
        for c in (calls if isinstance(calls, list) else [])
        if isinstance(f := (c.get("function") if isinstance(c, dict) else None), dict)
    ]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _json_safe(value: Any) -> Any:
    """NaN and infinities as text: they are not JSON, and the page must parse."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def number(value: Any, spec: str = "%.4f") -> str:
    """A Jinja filter: a finite number formatted, anything else (text, NaN) as itself."""
    numeric = finite(value)
    if numeric is None:
        return "-" if value is None else str(value)
    return spec % numeric if abs(numeric) < 1e9 else f"{numeric:.4g}"


def _script_json(value: Any) -> str:
    """JSON safe inside <script>: no "</script>", no "<!--", no line separators. Dumped as it
    is first, and walked for NaN and infinities (``_json_safe``) only when it holds one: the
    walk was half of an 8,000-rollout report's time, for values that almost never need it."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a NaN or an infinity somewhere
        text = json.dumps(
            _json_safe(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False
        )
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render(run_dirs: list[str | Path]) -> str:
    runs = [load_run(Path(d)) for d in run_dirs]
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    environment.filters["number"] = number
    template = environment.from_string(TEMPLATE.read_text())
    views = []
    for index, run in enumerate(runs):
        rewards = [r.get("reward") for r in run["rows"]]
        views.append(
            {
                "index": index,
                "meta": _json_safe(run["meta"]),
                "summary": run["meta"].get("summary") or {},
                "histogram": histogram(rewards),
                "timing": timing(run["rows"]),
                "data": _script_json([_rollout(r) for r in run["rows"]]),
                "dir": run["dir"],
            }
        )
    return template.render(runs=views, title=_title(runs))


def _title(runs: list[dict[str, Any]]) -> str:
    if len(runs) == 1:
        meta = runs[0]["meta"]
        return f"{meta.get('env_id')} · {meta.get('model')}"
    return f"{len(runs)} runs compared"


def write_report(run_dirs: list[str | Path], out: str | Path | None = None) -> Path:
    """Write the report (default: ``report.html`` in the first run's directory)."""
    from verifiers.processes.own_dir import write_own_file

    target = Path(out) if out else Path(run_dirs[0]) / "report.html"
    write_own_file(target, render(run_dirs))
    return target


def main(argv: list[str] | None = None) -> int:
    """vf-report RUN_DIR [RUN_DIR ...] [-o FILE]: one run's report, or several compared."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="vf-report", description=main.__doc__)
    parser.add_argument("runs", nargs="+", help="vf-eval run directories (metadata.json)")
    parser.add_argument("-o", "--output", help="where to write (default: RUN_DIR/report.html)")
    args = parser.parse_args(argv)
    missing = [d for d in args.runs if not (Path(d) / "metadata.json").exists()]
    if missing:
        print(f"vf-report: not a vf-eval run directory: {missing[0]}", file=sys.stderr)
        return 2
    print(write_report(args.runs, args.output))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
