"""Import shim for the benchmark (bench/openenv/setup.sh), not FastMCP.

openenv-core's http_server.py imports mcp_environment.py, which imports
``fastmcp.Client``, ``fastmcp.client.client.CallToolResult`` and
``mcp.types.TextContent`` at module top. The benchmark's Environment is a
plain one and never reaches them, so these stand-ins only have to exist:
anything that uses one raises at once instead of measuring something else.
"""


class _Stub:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            f"{type(self).__module__}.{type(self).__name__} is the agentenv benchmark's "
            "import shim: FastMCP is not installed"
        )


class Client(_Stub):
    """Stand-in for fastmcp.Client."""


class FastMCP(_Stub):
    """Stand-in for fastmcp.FastMCP."""
