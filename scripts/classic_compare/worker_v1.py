"""Run one upstream v1 example taskset and print its episodes as JSON (either SDK).

Invoked by ``compare_v1.py`` once under this SDK and once under the real verifiers 0.3.1, with
the taskset's package directory on ``PYTHONPATH``: both load it by id as upstream's own tests do
(``EvalConfig(env={"taskset": {"id": ...}})``, ``load_environment``), run it in process
(upstream's ``run_eval`` takes the config alone and runs in process with ``serve=None``; this
SDK's takes the env and the config, as at the v0.3.0 tag) and write ``traces.jsonl``.
``datasets.load_dataset`` is replaced by the stand-in datasets, so both see equal rows.

With ``--parse FILE`` instead, it reads every line of a ``traces.jsonl`` with this SDK's
``WireEpisode`` (run under the real 0.3.1 to check this SDK's lines) and prints how many
parsed and the first failure.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
import sys
from pathlib import Path
from typing import Any


def _idx(data: Any) -> Any:
    """The task row's index (a model on a typed trace, a dict on a loose one)."""
    return data.get("idx") if isinstance(data, dict) else getattr(data, "idx", None)


def run(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The taskset's episodes against the spec's endpoint, one row per trace."""
    from stand_in_data import install_stand_in_datasets

    install_stand_in_datasets()
    random.seed(0)
    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig
    from verifiers.v1.utils.loaders import load_environment

    real = len(inspect.signature(run_eval).parameters) == 1  # the real 0.3.1: run_eval(config)
    seat: dict[str, Any] = {
        "max_turns": spec.get("max_turns", 6),
        "harness": {"id": spec.get("harness", "null")},
        "runtime": {"type": "subprocess"},
    }
    config = EvalConfig.model_validate(
        {
            "env": {
                "taskset": {"id": spec["id"], **spec.get("taskset", {})},
                **{name: seat for name in spec.get("seats", ["agent"])},
                **spec.get("env", {}),
            },
            "model": "compare-model",
            "client": {"base_url": spec["url"], "api_key_var": "OPENAI_API_KEY"},
            "sampling": {"temperature": 0.0, "max_tokens": 64},
            "num_tasks": spec.get("n", 3),
            "num_rollouts": spec.get("r", 1),
            "max_concurrent": 1,
            "output_dir": spec["out"],
            # in process, no live view, nothing pushed (0.3.1 made serve and rich optional)
            **({"serve": None, "rich": None} if real else {"rich": False}),
            "push": False,
        }
    )
    if real:
        episodes = asyncio.run(run_eval(config))
    else:  # this SDK (and the v0.3.0 tag): run_eval(env, config)
        episodes = asyncio.run(run_eval(load_environment(config.env), config))
    rows = []
    for episode in episodes:
        for trace in episode.traces:
            rows.append(
                {
                    "task": f"{trace.task.type}:{_idx(trace.task.data)}",
                    "reward": trace.reward,
                    "rewards": {
                        k: None if v is None else [v.score, v.weight]
                        for k, v in trace.rewards.items()
                    },
                    "metrics": dict(trace.metrics),
                    "turns": trace.num_turns,
                    "stop": trace.stop_condition,
                    "errors": [f"{e.type}: {e.message[:2000]}" for e in trace.errors],
                }
            )
    return rows


def parse(path: Path) -> dict[str, Any]:
    """How many of ``path``'s lines this SDK's ``WireEpisode`` reads, and the first failure."""
    from verifiers.v1 import WireEpisode

    lines = [line for line in path.read_text().splitlines() if line.strip()]
    failures = []
    for number, line in enumerate(lines, 1):
        try:
            WireEpisode.model_validate_json(line)
        except Exception as e:  # a validation error: report it, not raise
            failures.append(f"line {number}: {' '.join(str(e).split())[:300]}")
    return {
        "lines": len(lines),
        "parsed": len(lines) - len(failures),
        "first_failure": failures[:1],
    }


def main() -> None:
    if sys.argv[1] == "--parse":
        print("PARSED " + json.dumps(parse(Path(sys.argv[2]))))
        return
    rows = run(json.loads(sys.argv[1]))
    import verifiers

    print("SDK " + verifiers.__file__)
    print("RESULT " + json.dumps(rows, default=str))


if __name__ == "__main__":
    main()
