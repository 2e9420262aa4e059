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
    rows = (
        list(read_rows(run_dir / "results.jsonl")) if (run_dir / "results.jsonl").exists() else []
    )
    return {"dir": str(run_dir), "meta": meta, "rows": rows}


def histogram(values: list[float], bins: int = BINS) -> dict[str, Any]:
    """Counts over [min, max] (or [0, 1] when all rewards lie in it), for the SVG."""
    if not values:
        return {"counts": [], "low": 0.0, "high": 1.0, "peak": 0}
    low, high = min(values), max(values)
    if low >= 0.0 and high <= 1.0:
        low, high = 0.0, 1.0
    if math.isclose(low, high):
        low, high = low - 0.5, high + 0.5
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - low) / (high - low) * bins))] += 1
    return {"counts": counts, "low": low, "high": high, "peak": max(counts)}


def timing(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Mean and 95th-percentile generation time and mean scoring time per rollout (ms)."""
    generation = sorted(
        float(t["generation_ms"])
        for r in rows
        if (t := r.get("timing") or {}).get("generation_ms") is not None
    )
    scoring = [
        float(t["scoring_ms"])
        for r in rows
        if (t := r.get("timing") or {}).get("scoring_ms") is not None
    ]
    return {
        "generation_ms": sum(generation) / len(generation) if generation else None,
        "generation_p95_ms": generation[int(0.95 * (len(generation) - 1))] if generation else None,
        "scoring_ms": sum(scoring) / len(scoring) if scoring else None,
    }


def _rollout(row: dict[str, Any]) -> dict[str, Any]:
    """What the page shows of a rollout (compact keys keep 10,000 rollouts small)."""
    error = row.get("error")
    return {
        "e": row.get("example_id"),
        "i": row.get("rollout_index"),
        "r": row.get("reward"),
        "m": row.get("metrics") or {},
        "x": (error.get("type") if isinstance(error, dict) else str(error)) if error else None,
        "xm": (error.get("message") if isinstance(error, dict) else None) if error else None,
        "a": row.get("answer"),
        "p": _messages(row.get("prompt")),
        "c": _messages(row.get("completion")),
        "t": (row.get("usage") or {}).get("completion_tokens"),
        "g": (row.get("timing") or {}).get("generation_ms"),
    }


def _messages(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    out = []
    for m in value or []:
        calls = [
            {
                "name": (c.get("function") or {}).get("name"),
                "arguments": (c.get("function") or {}).get("arguments"),
            }
            for c in m.get("tool_calls") or []
        ]
        out.append({"role": m.get("role"), "content": m.get("content") or "", "calls": calls})
    return out


def _script_json(value: Any) -> str:
    """JSON safe inside <script>: no "</script>", no "<!--", no line separators."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def render(run_dirs: list[str | Path]) -> str:
    runs = [load_run(Path(d)) for d in run_dirs]
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = environment.from_string(TEMPLATE.read_text())
    views = []
    for index, run in enumerate(runs):
        rewards = [float(r.get("reward") or 0.0) for r in run["rows"]]
        views.append(
            {
                "index": index,
                "meta": run["meta"],
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
    target = Path(out) if out else Path(run_dirs[0]) / "report.html"
    target.write_text(render(run_dirs), encoding="utf-8")
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
