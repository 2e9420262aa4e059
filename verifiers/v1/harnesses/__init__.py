"""The harnesses this SDK runs: ``null`` (an in-process chat loop over the taskset's Python
tools). Upstream's others (``bash``, agent CLIs, container programs) are not here yet; an agent
pinned to one fails before its first call, naming it."""

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
