"""Classic module path ``verifiers.utils.eval_utils``."""

from verifiers.results.records import make_dataset

__all__ = ["make_dataset"]
