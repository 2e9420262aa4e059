"""Upstream's v1 example tasksets (tag v0.3.0) under this SDK and under the real verifiers 0.3.1.

    python scripts/classic_compare/compare_v1.py --anchor DIR --upstream-python PY \
        [--only NAME...] [--details DIR] [--markdown FILE]

``--anchor`` holds upstream's ``environments/`` at tag v0.3.0 (a checkout, or ``git archive
v0.3.0 environments``); ``--upstream-python`` is an interpreter with ``verifiers==0.3.1`` in a
virtualenv of its own. Each taskset in ``catalog_v1.py`` runs once on each side (``worker_v1.py``,
its package directory on ``PYTHONPATH``, loaded by id, the ``null`` harness on the ``subprocess``
runtime unless its entry says otherwise) against one scripted OpenAI-compatible server (the one
``compare.py`` uses: replies are a pure function of the request) with the same stand-in datasets.
The table says, per taskset, whether the per-task rewards (each reward function's score),
metrics, turns and stop conditions were the same, what differed, and whether every line of this
SDK's ``traces.jsonl`` parses with the real 0.3.1's ``WireEpisode``. A difference without a
recorded explanation (``known`` in the catalog) fails the run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from catalog_v1 import V1_TASKSETS
from compare import reply_for
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
COLUMNS = ("taskset", "tasks", "rewards", "metrics+turns", "WireEpisode", "differences")


def _side(
    python: str, pythonpath: list[Path], args: list[str], extra_env: dict[str, str] | None = None
) -> tuple[list[str], str]:
    """Run the worker; its stdout lines and the last line of its stderr."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "VF_API_VERSION")
    }
    env.update(PYTHONPATH=os.pathsep.join(map(str, pythonpath)), OPENAI_API_KEY="compare")
    env.update(extra_env or {})
    done = subprocess.run(
        [python, str(HERE / "worker_v1.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=HERE,
    )
    return done.stdout.splitlines(), (done.stderr.strip().splitlines() or ["no output"])[-1][:300]


def script_env(upstream_python: str, deps_date: str) -> dict[str, str]:
    """The real side's uv settings for the PEP 723 scripts 0.3.1 runs its harnesses and
    verifiers as (``runtime.prepare_uv_script``): their unpinned dependencies resolved as of
    ``deps_date`` (0.3.1's release) in a uv cache of their own, so a script environment that
    uv resolved later (or for another date) is never reused. Today's ``openai`` (3.63, on
    ``httpx2`` 2.17) refuses the ``httpx.Timeout`` that 0.3.1's ``null`` harness passes it."""
    cache = Path(upstream_python).absolute().parents[1] / f"uv-scripts-{deps_date}"
    return {"UV_EXCLUDE_NEWER": deps_date, "UV_CACHE_DIR": str(cache)}


def run_side(
    python: str, ours: bool, spec: dict[str, Any], package_dir: Path, extra_env: dict[str, str]
) -> list[dict] | str:
    """One side's rows, or why it failed."""
    path = [REPO, HERE, package_dir] if ours else [HERE, package_dir]
    lines, last_error = _side(python, path, [json.dumps(spec)], None if ours else extra_env)
    sdk = next((line[4:] for line in lines if line.startswith("SDK ")), "")
    if sdk and Path(sdk).resolve().is_relative_to(REPO) != ours:
        return f"{python} imported the wrong SDK ({sdk})"
    for line in lines:
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    return last_error


def steady(rows: list[dict], volatile: list[str]) -> list[dict]:
    """The rows with the ``volatile`` metrics (wall-clock measurements) kept by name only."""
    return [
        {**r, "metrics": {k: ("measured" if k in volatile else v) for k, v in r["metrics"].items()}}
        for r in rows
    ]


def key(row: dict) -> tuple:
    """What must be equal per trace: the task, each reward's score and weight, the metrics,
    turns, stop condition and whether it failed (error types)."""
    return (
        row["task"],
        round(row["reward"], 9),
        json.dumps(row["rewards"], sort_keys=True),
        json.dumps(
            {k: v if not isinstance(v, float) else round(v, 9) for k, v in row["metrics"].items()},
            sort_keys=True,
        ),
        row["turns"],
        row["stop"],
        tuple(sorted(e.split(":")[0] for e in row["errors"])),
    )


def differences(ours: list[dict], real: list[dict]) -> list[str]:
    """What differs between the two sides' traces, briefly."""
    if sorted(map(key, ours)) == sorted(map(key, real)):
        return []
    out = []
    if len(ours) != len(real):
        out.append(f"{len(ours)} vs {len(real)} traces")
    for name, pick in (
        ("tasks", lambda r: r["task"]),
        ("rewards", lambda r: (round(r["reward"], 9), json.dumps(r["rewards"], sort_keys=True))),
        ("metrics", lambda r: json.dumps(r["metrics"], sort_keys=True)),
        ("turns", lambda r: r["turns"]),
        ("stop", lambda r: r["stop"]),
        ("errors", lambda r: tuple(e.split(":")[0] for e in r["errors"])),
    ):
        a, b = [pick(r) for r in ours], [pick(r) for r in real]
        if sorted(map(str, a)) != sorted(map(str, b)):
            out.append(f"{name}: ours {a[:3]} vs real {b[:3]}")
    return out


def compare_one(name: str, options: dict, args, url: str) -> tuple[list[str], str]:
    """One taskset's row and its outcome: ``identical``, ``explained``, ``skipped`` or
    ``unexplained``."""
    if options.get("skip"):
        return [name, "-", "-", "-", "-", f"skipped: {options['skip']}"], "skipped"
    package_dir = args.anchor / "environments" / name
    if not package_dir.is_dir():
        return [name, "-", "-", "-", "-", f"not in {args.anchor}"], "unexplained"
    spec = {
        "id": name,
        "url": url,
        "n": options.get("n", 3),
        "r": options.get("r", 1),
        "harness": options.get("harness", "null"),
        "seats": options.get("seats", ["agent"]),
        "taskset": options.get("taskset", {}),
        "env": options.get("env", {}),
    }
    scratch = Path(tempfile.mkdtemp(prefix=f"v1-compare-{name}-"))
    results = {}
    for label, python in (("ours", sys.executable), ("real", args.upstream_python)):
        side_spec = {**spec, "out": str(scratch / label)}
        results[label] = run_side(python, label == "ours", side_spec, package_dir, args.script_env)
    ours, real = results["ours"], results["real"]
    if args.details:
        args.details.mkdir(parents=True, exist_ok=True)
        (args.details / f"{name}.json").write_text(json.dumps(results, indent=1, default=str))
    known = options.get("known", "")
    traces = sorted((scratch / "ours").rglob("traces.jsonl"))
    wire = "-"
    if traces:
        lines, last_error = _side(args.upstream_python, [HERE], ["--parse", str(traces[0])])
        parsed = next((json.loads(line[7:]) for line in lines if line.startswith("PARSED ")), None)
        if parsed is None:
            wire = f"FAILED: {last_error}"
        elif parsed["parsed"] == parsed["lines"] and parsed["lines"]:
            wire = f"{parsed['lines']}/{parsed['lines']} parse"
        else:
            wire = f"FAILED {parsed['parsed']}/{parsed['lines']}: {parsed['first_failure']}"
    if isinstance(ours, str) or isinstance(real, str):
        note = f"ours: {ours if isinstance(ours, str) else 'ok'} | real: {real if isinstance(real, str) else 'ok'}"
        return [
            name,
            "-",
            "-",
            "-",
            wire,
            f"{note}. {known}",
        ], "explained" if known else "unexplained"
    volatile = options.get("volatile", [])
    ours, real = steady(ours, volatile), steady(real, volatile)
    diff = differences(ours, real)
    same_rewards = sorted(
        (r["task"], round(r["reward"], 9), json.dumps(r["rewards"], sort_keys=True)) for r in ours
    ) == sorted(
        (r["task"], round(r["reward"], 9), json.dumps(r["rewards"], sort_keys=True)) for r in real
    )
    wire_ok = wire.endswith(" parse")
    identical = not diff and wire_ok
    row = [
        name,
        str(len({r["task"] for r in ours})),
        "same" if same_rewards else "DIFFER",
        "same" if not diff else "DIFFER",
        wire,
        ("" if identical else "; ".join(diff) + (f" [{known}]" if known else " [unexplained]"))
        + (
            f"{' ' if diff else ''}({', '.join(volatile)}: wall-clock, compared by name)"
            if volatile
            else ""
        ),
    ]
    return row, "identical" if identical else "explained" if known else "unexplained"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--anchor", required=True, type=Path, help="holds environments/ at v0.3.0")
    parser.add_argument("--upstream-python", required=True, help="python with verifiers==0.3.1")
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--details", type=Path, help="write each side's traces here")
    parser.add_argument("--markdown", type=Path, help="also write the table here, as Markdown")
    parser.add_argument(
        "--deps-date",
        default="2026-08-29T00:00:00Z",
        help="resolve the real side's uv-script dependencies as of this date (0.3.1's release)",
    )
    args = parser.parse_args()
    args.script_env = script_env(args.upstream_python, args.deps_date)
    from verifiers.testing import ModelServer

    table = Table(title="upstream v1 example tasksets (v0.3.0): this SDK vs real verifiers 0.3.1")
    for column in COLUMNS:
        table.add_column(column)
    rows, outcomes = [], []
    with ModelServer(reply_for) as server:
        for name, options in V1_TASKSETS.items():
            if args.only and name not in args.only:
                continue
            row, outcome = compare_one(name, options, args, server.base_url)
            rows.append(row)
            outcomes.append(outcome)
            table.add_row(*row)
    Console(width=240).print(table)
    print(
        f"{outcomes.count('identical')} identical, {outcomes.count('explained')} with explained "
        f"differences, {outcomes.count('unexplained')} unexplained, {outcomes.count('skipped')} skipped"
    )
    if args.markdown:
        cells = [list(COLUMNS), ["---"] * len(COLUMNS)] + [
            [c.replace("|", "\\|") for c in r] for r in rows
        ]
        args.markdown.write_text("".join("| " + " | ".join(r) + " |\n" for r in cells))
    return 1 if "unexplained" in outcomes else 0


if __name__ == "__main__":
    sys.exit(main())
