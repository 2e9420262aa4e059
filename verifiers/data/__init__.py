"""Answer extraction, the classic system prompts, and the named example datasets."""

from verifiers.data.answers import extract_boxed_answer, extract_hash_answer, strip_non_numeric
from verifiers.data.examples import EXAMPLE_DATASETS, load_example_dataset
from verifiers.data.prompts import BOXED_SYSTEM_PROMPT, THINK_BOXED_SYSTEM_PROMPT

__all__ = [
    "BOXED_SYSTEM_PROMPT",
    "EXAMPLE_DATASETS",
    "THINK_BOXED_SYSTEM_PROMPT",
    "extract_boxed_answer",
    "extract_hash_answer",
    "load_example_dataset",
    "strip_non_numeric",
]
