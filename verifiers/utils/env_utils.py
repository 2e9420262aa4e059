"""Classic module path ``verifiers.utils.env_utils``."""

from verifiers.loading.loader import load_environment

__all__ = ["load_environment"]
