"""Classic module path ``verifiers.utils.config_utils``."""

from verifiers.classic.config_keys import MissingKeyError, ensure_keys

__all__ = ["MissingKeyError", "ensure_keys"]
