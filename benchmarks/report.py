"""report.html at scale: generation time and first screen in headless Chromium.

    python benchmarks/report.py [--rollouts 10000]

Writes a run of ``--rollouts`` multi-turn rollouts with tool calls (results.jsonl and
metadata.json in vf-eval's format), times ``write_report``, then opens the file in the
distribution's headless chromium (Playwright) and reads how long until the page's script had
drawn its first screen of rollouts (navigation start → load event, which waits for that script).
Targets: generated in under 5 s, first screen under 1 s, for 10,000 rollouts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import stop_cleanly  # beside this script
from rich.console import Console
from rich.table import Table


def synthetic_run(directory: Path, rollouts: int) -> Path:
    from verifiers.results.records import SummaryAccumulator

    rng = random.Random(0)
    acc = SummaryAccumulator()
    with (directory / "results.jsonl").open("w") as f:
        for n in range(rollouts):
            reward = rng.random()
            row = {
                "example_id": n // 4,
                "rollout_index": n % 4,
                "prompt": [
                    {"role": "system", "content": "Answer with the tools."},
                    {"role": "user", "content": f"What is the capital of country {n}? " * 3},
                ],
                "completion": [
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [
                            {
                                "id": f"c{n}",
                                "type": "function",
                                "function": {
                                    "name": "get_capital",
                                    "arguments": '{"country": "peru"}',
                                },
                            }
                        ],
                    },
                    {"role": "tool", "content": "Lima", "tool_call_id": f"c{n}"},
                    {"role": "assistant", "content": "The capital is Lima. " * 4},
                ],
                "answer": "Lima",
                "reward": reward,
                "metrics": {"correct": float(reward > 0.5), "num_turns": 2.0},
                "error": None if n % 50 else {"type": "ToolCallError", "message": "bad arguments"},
                "usage": {"prompt_tokens": 40, "completion_tokens": 30},
            }
            acc.add(row)
            f.write(json.dumps(row) + "\n")
    meta = {
        "env_id": "tool-test",
        "env_version": "0.1.0",
        "env_content_hash": "sha256:0",
        "verifiers_version": "0",
        "model": "synthetic",
        "num_examples": rollouts // 4,
        "rollouts_per_example": 4,
        "started_at": "2026-12-01T00:00:00Z",
        "status": "completed",
        "summary": acc.summary().model_dump(),
    }
    (directory / "metadata.json").write_text(json.dumps(meta))
    return directory


def main() -> None:
    stop_cleanly.install()
    from playwright.sync_api import sync_playwright

    from verifiers.results.report import write_report

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = synthetic_run(Path(tmp), args.rollouts)
        start = time.perf_counter()
        report = write_report([run])
        generate_s = time.perf_counter() - start
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        # Playwright's driver and the browser put their temp files (artifacts, the browser's
        # profile, org.chromium.*) in their TMPDIR: where the benchmark removes them, since a
        # driver stopped by a signal removes nothing of its own
        scratch = str(stop_cleanly.scratch_dir("vf-bench-chromium-"))
        os.environ["TMPDIR"] = scratch
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page()
            page.goto(report.as_uri(), wait_until="load")
            first_screen_ms = page.evaluate(
                "performance.getEntriesByType('navigation')[0].loadEventStart"
            )
            drawn = page.locator(".rollout").count()
            browser.close()
        size_mb = report.stat().st_size / 2**20
    table = Table(title=f"report.html · {args.rollouts:,} rollouts ({size_mb:.1f} MiB)")
    for column in ("measure", "value", "target"):
        table.add_column(column, justify="right")
    table.add_row("generate (write_report)", f"{generate_s:.2f} s", "< 5 s")
    table.add_row("first screen in Chromium", f"{first_screen_ms / 1000:.2f} s", "< 1 s")
    table.add_row("rollouts drawn on it", str(drawn), "50")
    Console().print(table)


if __name__ == "__main__":
    main()
