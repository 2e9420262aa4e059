"""Classic module path ``verifiers.utils.logging_utils``."""

from verifiers.logging_setup import (
    log_level,
    print_prompt_completions_sample,
    quiet_verifiers,
    setup_logging,
)

__all__ = ["log_level", "print_prompt_completions_sample", "quiet_verifiers", "setup_logging"]
