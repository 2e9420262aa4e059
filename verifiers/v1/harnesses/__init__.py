"""The harnesses this SDK runs: ``null`` (an in-process chat loop over the taskset's tools:
Python methods called in-process, or an MCP server's tools over the rollout's session with it,
``verifiers.v1.mcp``) and ``bash`` (that loop plus upstream's ``bash``/``edit`` tools, whose commands run in a
confined sandbox per rollout: the ``subprocess`` runtime). Upstream's others (third-party agent
CLIs, container programs) are refused by name before a rollout's first call."""

from verifiers.v1.harnesses.registry import AVAILABLE, harness_for

__all__ = ["AVAILABLE", "harness_for"]
