"""Import shim: see fastmcp/__init__.py."""
