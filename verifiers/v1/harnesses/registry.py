"""Which harness runs an agent: ``harness_for(id)`` over the harnesses this SDK has."""

from __future__ import annotations

from verifiers.v1.errors import HarnessError
from verifiers.v1.harnesses.null import NullHarness

AVAILABLE = {"null": NullHarness}


def harness_for(harness_id: str) -> type[NullHarness]:
    try:
        return AVAILABLE[harness_id]
    except KeyError:
        raise HarnessError(
            f"harness {harness_id!r} is not in this SDK yet (issue 41); the harnesses here are "
            f"{sorted(AVAILABLE)} — pin one with --env.agent.harness.id null"
        ) from None
