"""Classic module path ``verifiers.utils.tool_utils``: tool schemas from Python functions."""

from verifiers.tools.calls import is_valid_tool_content_parts
from verifiers.tools.defs import convert_func_to_oai_tool, convert_func_to_tool_def

__all__ = ["convert_func_to_oai_tool", "convert_func_to_tool_def", "is_valid_tool_content_parts"]
