"""Classic environments run through the v1 eval path (``[legacy]``), their rollouts read as
``Trace``s. Not in this SDK yet (issue 41); ``vf-eval`` runs classic environments."""

from __future__ import annotations

from typing import Any

from verifiers.v1.configs.cli.eval import EvalConfig


async def run_legacy_eval(config: EvalConfig) -> list[Any]:
    """Evaluate the classic environment ``config.legacy`` names; the results' records."""
    raise NotImplementedError(
        "the v1 bridge for classic environments is not in this SDK yet (issue 41); "
        f"run `vf-eval {config.legacy.id or 'ENV'}` instead"
    )
