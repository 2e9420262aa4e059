"""Taskset toolsets as MCP servers (upstream's ``verifiers.v1.mcp``): ``server`` serves a
``Toolset`` over streamable HTTP (``Toolset.run``); ``client`` gives a rollout the tools of a
toolset, in-process when colocated, else over MCP from a server it launches or one at ``url``."""

from verifiers.v1.toolset import SharedToolsetConfig, Toolset, ToolsetConfig

__all__ = ["SharedToolsetConfig", "Toolset", "ToolsetConfig"]
