"""verl's side of agentenv: `AgentEnvAgentLoop`, an agent loop registered as
`agentenv` that plays each row written by `agentenv skyrl rows` as one
episode on an `agentenv serve` server (docs/training-verl.md).

Nothing here imports verl until the loop is used, so the package imports
wherever it is installed.
"""

from pathlib import Path

AGENT_NAME = "agentenv"
# The file for actor_rollout_ref.rollout.agent.agent_loop_config_path.
AGENT_LOOP_CONFIG = str(Path(__file__).with_name("agent_loop.yaml"))

__version__ = "0.1.0"
__all__ = ["AGENT_LOOP_CONFIG", "AGENT_NAME", "AgentEnvAgentLoop"]


def __getattr__(name):
    if name == "AgentEnvAgentLoop":
        from .agent_loop import AgentEnvAgentLoop

        return AgentEnvAgentLoop
    raise AttributeError(f"module 'agentenv_verl' has no attribute {name!r}")
