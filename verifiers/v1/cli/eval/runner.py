"""Running a v1 eval (in process, or through env-server workers).

Not in this SDK yet: running a v1 episode needs agents, harnesses and runtimes (issue 41).
The entry points exist so that code importing them loads, and say what is missing when run.
"""

from __future__ import annotations

from typing import Any

from verifiers.v1.configs.cli.eval import EvalConfig

MISSING = (
    "v1 eval runs are not in this SDK yet (issue 41: agents, the null and bash harnesses "
    "on the subprocess runtime); evaluate a classic environment with vf-eval"
)


async def run_eval(env: Any, config: EvalConfig) -> list[Any]:
    """Evaluate ``env`` as ``config`` says; the results' records."""
    raise NotImplementedError(MISSING)


async def run_eval_server(config: EvalConfig) -> list[Any]:
    """Evaluate through env-server workers; the results' records."""
    raise NotImplementedError(MISSING)
