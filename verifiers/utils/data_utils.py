"""Classic module path ``verifiers.utils.data_utils``."""

from verifiers.data import (
    BOXED_SYSTEM_PROMPT,
    THINK_BOXED_SYSTEM_PROMPT,
    extract_boxed_answer,
    extract_hash_answer,
    load_example_dataset,
    strip_non_numeric,
)

__all__ = [
    "BOXED_SYSTEM_PROMPT",
    "THINK_BOXED_SYSTEM_PROMPT",
    "extract_boxed_answer",
    "extract_hash_answer",
    "load_example_dataset",
    "strip_non_numeric",
]
