"""Classic module path ``verifiers.utils.env_utils``."""

from verifiers.loading import load_environment

__all__ = ["load_environment"]
