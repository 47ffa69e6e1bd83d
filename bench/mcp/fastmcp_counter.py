"""The anchor of tickbox-bench's MCP row: the example counter's read-only
`history` tool as a FastMCP server (the MCP Python SDK's high-level server,
called `MCPServer` since mcp 2), over stdio. Same answer as the wasm
counter's `history` on a fresh counter: `{"recent": []}`.

    python3 bench/mcp/fastmcp_counter.py
"""

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("fastmcp-counter")
recent: list[dict[str, Any]] = []


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def history() -> dict[str, Any]:
    """Read the last 256 changes."""
    return {"recent": recent}


if __name__ == "__main__":
    server.run("stdio")
