"""Stand-in: verl.experimental.agent_loop."""
