"""Import shim: see fastmcp/__init__.py."""

from fastmcp import _Stub


class TextContent(_Stub):
    """Stand-in for mcp.types.TextContent."""
