"""Classic module path ``verifiers.utils.error_utils``: error chains and ``ErrorData``."""

from verifiers.classic.error_data import (
    ErrorChain,
    error_data,
    error_data_to_exception,
    error_from_data,
    get_error_chain,
    get_vf_error_chain,
    is_error_data,
    validate_error_data,
    vf_error_types,
)

__all__ = [
    "ErrorChain",
    "error_data",
    "error_data_to_exception",
    "error_from_data",
    "get_error_chain",
    "get_vf_error_chain",
    "is_error_data",
    "validate_error_data",
    "vf_error_types",
]
