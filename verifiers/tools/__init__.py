"""Tools for ToolEnv: schemas from Python functions and safe execution of the model's calls."""

from verifiers.tools.calls import (
    ToolCallError,
    format_output,
    is_valid_tool_content_parts,
    parse_arguments,
)
from verifiers.tools.schema import ToolSpec, parse_docstring, tool_spec

__all__ = [
    "ToolCallError",
    "ToolSpec",
    "format_output",
    "is_valid_tool_content_parts",
    "parse_arguments",
    "parse_docstring",
    "tool_spec",
]
