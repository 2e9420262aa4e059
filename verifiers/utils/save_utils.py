"""Classic module path ``verifiers.utils.save_utils``: rollouts as ``RolloutOutput`` rows."""

from verifiers.results.outputs import (
    is_json_serializable,
    load_outputs,
    make_dataset,
    state_to_output,
    states_to_outputs,
)

__all__ = [
    "is_json_serializable",
    "load_outputs",
    "make_dataset",
    "state_to_output",
    "states_to_outputs",
]
