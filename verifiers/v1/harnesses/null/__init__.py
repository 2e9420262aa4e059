"""The ``null`` harness (``harness.py``): an in-process chat loop over the taskset's tools
(Python tools in-process, MCP servers' tools over their sessions)."""

from verifiers.v1.configs.harness import NullHarnessConfig
from verifiers.v1.harnesses.null.harness import NullHarness

__all__ = ["NullHarness", "NullHarnessConfig"]
