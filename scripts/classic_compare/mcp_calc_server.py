"""A local MCP server (stdio) with two small tools, for running MCP environments offline."""

from mcp.server.fastmcp import FastMCP

server = FastMCP("calc")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


if __name__ == "__main__":
    server.run()
