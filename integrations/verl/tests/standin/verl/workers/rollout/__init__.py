"""Stand-in: verl.workers.rollout (docs in tests/standin/README.md)."""
