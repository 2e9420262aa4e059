"""Upstream example environments, run unchanged under this SDK and under the classic one.

    python scripts/classic_compare/compare.py --anchor PATH --classic-python PYTHON

PATH is a checkout of PrimeIntellect-ai/verifiers (e.g. tag v0.1.8.post2); PYTHON an interpreter
with the classic SDK installed (``pip install verifiers==0.1.8.post2`` in its own virtualenv).
Both runs talk to one scripted OpenAI-compatible server whose replies are a pure function of the
request, with the same stand-in datasets, so equal code paths give equal results. The table says,
per environment, whether rewards, metrics, turns and the requests themselves were identical.
Metrics this SDK adds on its own (``num_turns``, tool-call counts) are left out of the comparison.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from verifiers.testing import ModelServer, Reply

HERE = Path(__file__).resolve().parent
MONITOR = {"num_turns", "total_tool_calls"}

# name -> (environment args, examples); judges point back at the same scripted server.
ENVIRONMENTS: dict[str, dict] = {
    "reverse_text": {},
    "sentence_repeater": {},
    "tool_test": {"args": {"num_train_examples": 4, "num_eval_examples": 4}},
    "gsm8k": {
        "known": "v0.1.9 renamed MathRubric's metric correct_answer_reward_func -> correct_answer; "
        "this SDK keeps v0.1.8's name (rewards equal)"
    },
    "math_group": {},
    "gpqa": {
        "known": "the classic SDK shuffles gpqa's answer letters in worker processes: its own "
        "requests differ from run to run (ours are reproducible with a seed)"
    },
    "doublecheck": {
        "args": {"num_train_examples": 4},
        "known": "as gsm8k (MathRubric's metric name)",
    },
    "alphabet_sort": {},
    "reasoning_gym_env": {"args": {"num_train_examples": 4, "num_eval_examples": 4}},
    "mcp_env": {
        "args": {
            "mcp_servers": [
                {
                    "name": "calc",
                    "command": sys.executable,
                    "args": [str(HERE / "mcp_calc_server.py")],
                }
            ]
        },
    },
    "continuation_quality": {
        "judge": True,
        "known": "v0.1.8 fails on it (KeyError 'example_id': completion-mode datasets are never "
        "formatted); v0.1.9 runs it but, as simpleqa, never reaches its judge",
    },
    "simpleqa": {
        "judge": True,
        "known": "the classic judge() rejects the keyword arguments its reward functions pass, "
        "so the classic never calls the judge and scores 0",
    },
    "toxicity_explanation": {
        "judge": True,
        "known": "as simpleqa: the classic never reaches its judge",
    },
}


def reply_for(request: dict) -> Reply:
    """A deterministic reply: tool calls while tools are offered and none were answered yet,
    otherwise text that exercises the usual parsers (think, answer tags, boxed, yes/no)."""
    messages = request.get("messages") or []
    digest = int(hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest(), 16)
    tools = request.get("tools") or []
    if tools and not any(m.get("role") == "tool" for m in messages):
        calls = []
        for k, tool in enumerate(tools[: 1 + digest % len(tools)]):
            params = tool["function"].get("parameters", {}).get("properties", {})
            args = {
                p: (1 if s.get("type") in ("integer", "number") else "x") for p, s in params.items()
            }
            calls.append(Reply.tool_call(tool["function"]["name"], args, call_id=f"call_{k}"))
        return Reply(content=None, tool_calls=calls)
    last = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), "")
    text = last if isinstance(last, str) else json.dumps(last)
    word = ("yes", "no", "A", "B", "C")[digest % 5]
    return Reply(
        content=f"<think>step {digest % 7}</think>\n<answer>{text[:24][::-1]}</answer>\n"
        f"<reversed_text>{text[::-1][:40]}</reversed_text> \\boxed{{{digest % 9}}} {word}"
    )


def find_module(anchor: Path, name: str) -> Path | None:
    for candidate in (anchor / "environments" / name / f"{name}.py",):
        if candidate.exists():
            return candidate
    return None


def run(python: str, spec: dict) -> list[dict] | str:
    env = dict(
        os.environ,
        PYTHONPATH=str(HERE),
        OPENAI_API_KEY="compare",
        JUDGE_API_KEY="compare",
        OPENAI_BASE_URL=spec["url"],  # judges built without a client find the scripted server
    )
    result = subprocess.run(
        [python, str(HERE / "worker.py"), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=HERE,
    )
    sdk = next((line[4:] for line in result.stdout.splitlines() if line.startswith("SDK ")), "")
    if python != sys.executable and Path(sdk).resolve().is_relative_to(HERE.parents[1]):
        return f"{python} imported this SDK ({sdk}), not the classic one"
    for line in result.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    return (result.stderr.strip().splitlines() or ["no output"])[-1][:160]


def comparable(rows: list[dict]) -> list[tuple]:
    return sorted(
        (
            r["example_id"],
            round(r["reward"], 9),
            json.dumps(
                {
                    k: round(v, 9)
                    for k, v in r["metrics"].items()
                    if (k not in MONITOR and not k.endswith("_calls")) or k == "tool_calls"
                },
                sort_keys=True,
            ),
            r["turns"],
        )
        for r in rows
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--anchor", required=True, type=Path)
    parser.add_argument("--classic-python", required=True)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--details", type=Path, help="write each side's rollouts and requests here")
    args = parser.parse_args()
    table = Table(title="upstream example environments: this SDK vs the classic SDK")
    for column in ("environment", "rollouts", "rewards", "metrics+turns", "requests", "note"):
        table.add_column(column)
    failures = 0
    with ModelServer(reply_for) as server:
        for name, options in ENVIRONMENTS.items():
            if args.only and name not in args.only:
                continue
            path = find_module(args.anchor, name)
            if path is None:
                table.add_row(name, "-", "-", "-", "-", "not in this checkout")
                continue
            spec = {
                "module": name,
                "path": str(path),
                "url": server.base_url,
                "args": dict(options.get("args", {})),
            }
            if options.get("judge"):
                spec["args"].update(judge_base_url=server.base_url, judge_model="compare-judge")
            outcome = {}
            for label, python in (("ours", sys.executable), ("classic", args.classic_python)):
                server.requests.clear()
                rows = run(python, spec)
                outcome[label] = (
                    rows,
                    sorted(json.dumps(r, sort_keys=True) for r in server.requests),
                )
            (ours, our_requests), (classic, classic_requests) = outcome["ours"], outcome["classic"]
            if args.details:
                args.details.mkdir(parents=True, exist_ok=True)
                for label, (rows, requests) in outcome.items():
                    (args.details / f"{name}.{label}.json").write_text(
                        json.dumps(
                            {"rows": rows, "requests": [json.loads(r) for r in requests]}, indent=1
                        )
                    )
            if isinstance(ours, str) or isinstance(classic, str):
                failures += isinstance(ours, str) or not options.get("known")
                why = options.get("known", "")
                table.add_row(
                    name,
                    "-",
                    "-",
                    "-",
                    "-",
                    f"ours: {ours if isinstance(ours, str) else 'ok'} | classic: {classic if isinstance(classic, str) else 'ok'}. {why}",
                )
                continue
            same_rewards = sorted(round(r["reward"], 9) for r in ours) == sorted(
                round(r["reward"], 9) for r in classic
            )
            same_all = comparable(ours) == comparable(classic)
            same_requests = our_requests == classic_requests
            identical = same_rewards and same_all and same_requests
            failures += not identical and not options.get("known")
            table.add_row(
                name,
                str(len(ours)),
                "same" if same_rewards else "DIFFER",
                "same" if same_all else "DIFFER",
                "same"
                if same_requests
                else f"DIFFER ({len(our_requests)} vs {len(classic_requests)})",
                "" if identical else options.get("known", "unexplained difference"),
            )
    Console().print(table)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
