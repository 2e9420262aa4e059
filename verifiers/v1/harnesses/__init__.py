"""The harnesses this SDK runs: ``null`` (an in-process chat loop over the taskset's Python
tools). Upstream's others (``bash``, agent CLIs, container programs) are not here yet; an agent
pinned to one fails before its first call, naming it."""

from verifiers.v1.harnesses.registry import AVAILABLE, harness_for

__all__ = ["AVAILABLE", "harness_for"]
