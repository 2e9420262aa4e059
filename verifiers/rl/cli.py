"""The old home of vf-rl's entry point, for console scripts made before the move."""
from verifiers.cli.rl import main  # noqa: F401  TEMP-SHIM-39
