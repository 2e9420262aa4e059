"""The ``bash`` harness (``harness.py``): the model gets a ``bash`` tool (and ``edit``) whose
commands run in the rollout's confined sandbox."""

from verifiers.v1.harnesses.bash.harness import BashHarness, BashHarnessConfig

__all__ = ["BashHarness", "BashHarnessConfig"]
