"""The old home of vf-sft's entry point, for console scripts made before the move."""
from verifiers.cli.sft import main  # noqa: F401  TEMP-SHIM-39
