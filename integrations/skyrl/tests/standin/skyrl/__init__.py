"""Stand-in (see tests/standin/README.md)."""
