"""report.html in a real browser: headless Chromium (the distribution's package) via Playwright.

A real vf-eval run of the tool-test environment against the scripted loopback server, whose
replies carry tool calls and hostile HTML; the report vf-eval wrote is opened and read as a
user sees it. Screenshots go to ``$VF_TEST_ARTIFACTS`` (default ``outputs/test-artifacts``).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verifiers.testing import Reply

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs chromium (apt-get install chromium)"
)
ARTIFACTS = Path(
    os.environ.get("VF_TEST_ARTIFACTS", Path(__file__).parents[2] / "outputs" / "test-artifacts")
)
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


FIRST_TURNS = itertools.count()


def scripted(request):
    """First turn: a tool call (with hostile content beside it); after the tool result: an
    answer; every fourth first turn is refused with an HTTP 400 (an error on that rollout)."""
    last = request["messages"][-1]
    if last["role"] == "user" and next(FIRST_TURNS) % 4 == 0:
        return Reply(status=400, error="refused " + HOSTILE)
    if last["role"] == "tool":
        return f"It is {last['content']}. {HOSTILE}"
    return Reply(
        content=HOSTILE, tool_calls=[Reply.tool_call("get_capital", {"country": "france"})]
    )


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


def test_the_report_shows_the_run_and_runs_no_model_output(server, tmp_path, browser):
    server.set_handler(scripted)
    result = subprocess.run(
        [
            *(sys.executable, "-m", "verifiers.cli.eval", "tool-test", "-b", server.base_url),
            *("-m", "scripted", "-n", "6", "-r", "2", "--output-dir", str(tmp_path / "out")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (run,) = (tmp_path / "out" / "evals").glob("tool-test--scripted/*")
    assert f"report: {run / 'report.html'}" in result.stdout.replace("\n", "")
    meta = json.loads((run / "metadata.json").read_text())
    summary = meta["summary"]
    page = browser.new_page()
    page.goto((run / "report.html").as_uri())
    assert page.locator(".avg-reward").inner_text() == f"{summary['avg_reward']:.4f}"
    assert page.locator(".num-rollouts").inner_text() == str(summary["num_rollouts"]) == "12"
    assert page.locator(".num-errors").inner_text() == str(summary["num_errors"])
    assert page.locator(".timing").inner_text().endswith("ms")  # per-rollout timing shown
    assert summary["num_errors"] > 0
    assert "get_capital" in page.locator(".call").first.inner_text()
    assert page.locator(".rollout").count() == 12
    assert page.evaluate("window.__pwned") is None  # neither the script nor the onerror ran
    assert HOSTILE in page.locator(".msg.assistant .content").first.inner_text()  # shown as text
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
    page.locator(".errors-only").check()
    assert page.locator(".rollout").count() == summary["num_errors"]
    assert page.locator(".rollout.err").count() == summary["num_errors"]
    page.locator(".errors-only").uncheck()
    page.locator(".min-reward").fill("0.5")
    high = sum(
        1
        for line in (run / "results.jsonl").read_text().splitlines()
        if (json.loads(line)["reward"] or 0) >= 0.5
    )
    assert page.locator(".rollout").count() == high
    page.locator(".sort").select_option("reward-asc")
    page.screenshot(path=str(ARTIFACTS / "report-filtered.png"), full_page=True)
    assert page.evaluate("window.__pwned") is None
    page.close()


def test_vf_report_compares_runs(tmp_path, server, browser):
    server.set_handler(scripted)
    runs = []
    for n in ("3", "6"):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "verifiers.cli.eval",
                "tool-test",
                "-b",
                server.base_url,
                "-m",
                "scripted",
                "-n",
                n,
                "-r",
                "1",
                "--output-dir",
                str(tmp_path / n),
            ],
            check=True,
            capture_output=True,
        )
        runs.append(next((tmp_path / n / "evals").glob("tool-test--scripted/*")))
    out = tmp_path / "compare.html"
    made = subprocess.run(
        [sys.executable, "-m", "verifiers.results.report", *map(str, runs), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    page = browser.new_page()
    page.goto(out.as_uri())
    rows = page.locator("#comparison tr")
    assert rows.count() == 3 and page.locator("section.run").count() == 2
    assert page.locator("section.run").nth(1).locator(".rollout").count() == 6
    page.screenshot(path=str(ARTIFACTS / "report-compare.png"), full_page=True)
    missing = subprocess.run(
        [sys.executable, "-m", "verifiers.results.report", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and "not a vf-eval run directory" in missing.stderr
    page.close()


def test_vf_report_writes_a_page_for_odd_and_extreme_runs(tmp_path, browser):
    """String metrics, list completions (strings, numbers, messages with odd tool calls),
    NaN / infinite / huge / missing / textual rewards: vf-report still writes a page, the page
    parses and draws every rollout, and the values show as they are."""
    run = tmp_path / "run"
    run.mkdir()
    rewards = [float("nan"), float("inf"), float("-inf"), 1e308, -1e308, "bad", None, 0.5]
    rows = []
    for index, reward in enumerate(rewards):
        rows.append(
            {
                "example_id": index,
                "rollout_index": 0,
                "prompt": [{"role": "user", "content": "q"}],
                "completion": [
                    "a plain string choice",
                    7,
                    {
                        "role": "assistant",
                        "content": ["part"],
                        "tool_calls": ["junk", {"function": 3}],
                    },
                ]
                if index % 2
                else "completion text",
                "answer": {"x": [1, 2]},
                "reward": reward,
                "metrics": {"verdict": "pass", "score": float("nan"), "n": 3},
                "timing": {"generation_ms": "slow"} if index == 1 else [],
                "usage": "none",
            }
        )
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "metadata.json").write_text(
        json.dumps(
            {
                "env_id": "odd",
                "model": "m",
                "duration_s": "long",
                "summary": {
                    "num_rollouts": len(rows),
                    "avg_reward": float("nan"),
                    "std_reward": None,
                    "avg_metrics": {"verdict": "pass", "score": float("inf"), "n": 3.0},
                    "pass_at_k": {"1": "n/a"},
                    "usage": {},
                },
            }
        )
    )
    made = subprocess.run(
        [sys.executable, "-m", "verifiers.results.report", str(run)],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.goto((run / "report.html").as_uri())
    assert problems == []
    assert page.locator(".rollout").count() == len(rows)
    text = page.locator("body").inner_text()
    for shown in (
        "verdict pass",
        "a plain string choice",
        "reward inf",
        "reward nan",
        "reward bad",
    ):
        assert shown in text, shown
    assert "without a finite reward" in text
    page.close()
