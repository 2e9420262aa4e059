"""The ``null`` harness (``harness.py``): an in-process chat loop over the taskset's Python tools."""

from verifiers.v1.harnesses.null.harness import NullHarness

__all__ = ["NullHarness"]
