"""Import shim for the benchmark, not the MCP SDK: see fastmcp/__init__.py."""
