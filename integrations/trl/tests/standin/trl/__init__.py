"""Stand-in: trl (tests/standin/README.md)."""
