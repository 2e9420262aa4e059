"""Tools for ToolEnv: schemas from Python functions and safe execution of the model's calls."""

from verifiers.tools.calls import ToolCallError, execute_tool_calls, parse_arguments
from verifiers.tools.schema import ToolSpec, parse_docstring, tool_spec

__all__ = [
    "ToolCallError",
    "ToolSpec",
    "execute_tool_calls",
    "parse_arguments",
    "parse_docstring",
    "tool_spec",
]
