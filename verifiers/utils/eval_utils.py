"""Classic module path ``verifiers.utils.eval_utils``."""

from verifiers.results.records import columns_dataset as make_dataset

__all__ = ["make_dataset"]
