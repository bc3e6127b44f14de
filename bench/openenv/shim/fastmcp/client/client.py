"""Import shim: see fastmcp/__init__.py."""

from fastmcp import _Stub


class CallToolResult(_Stub):
    """Stand-in for fastmcp.client.client.CallToolResult."""
