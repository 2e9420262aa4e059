"""Results on disk: layout, versioned schema, streaming writer with resume."""

from verifiers.results.layout import METADATA_FILE, RESULTS_FILE, new_run_dir
from verifiers.results.schema import SCHEMA_VERSION, RolloutRecord, RunMetadata, RunSummary
from verifiers.results.writer import read_rows

__all__ = [
    "METADATA_FILE",
    "RESULTS_FILE",
    "SCHEMA_VERSION",
    "RolloutRecord",
    "RunMetadata",
    "RunSummary",
    "new_run_dir",
    "read_rows",
]
