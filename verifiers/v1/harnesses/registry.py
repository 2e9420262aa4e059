"""Which harness runs an agent: ``harness_for(id)`` over the harnesses this SDK has; one of
upstream's others is refused, naming what it would need."""

from __future__ import annotations

from verifiers.v1.errors import HarnessError
from verifiers.v1.harnesses.bash import BashHarness
from verifiers.v1.harnesses.null import NullHarness

AVAILABLE: dict[str, type[NullHarness]] = {"null": NullHarness, "bash": BashHarness}

AGENT_CLIS = (
    "claude-code", "codex", "kimi-code", "hermes-agent", "openclaw", "pi", "rlm",
    "mini-swe-agent", "opencode", "pool",
)  # fmt: skip
"""Upstream's harnesses that drive a third-party agent CLI in a container."""


def harness_for(harness_id: str) -> type[NullHarness]:
    try:
        return AVAILABLE[harness_id]
    except KeyError:
        pass
    here = f"the harnesses here are {sorted(AVAILABLE)}: pin one with --env.agent.harness.id bash"
    normal = harness_id.replace("_", "-")
    if normal in AGENT_CLIS:
        need = "a third-party agent CLI run in a container"
    elif normal in ("browser-use", "terminus-2"):
        need = "a container (a browser or a host tmux)"
    else:
        need = "a harness package this SDK does not have"
    raise HarnessError(
        f"harness {harness_id!r} needs {need}, which is not in this SDK; {here}"
    ) from None
