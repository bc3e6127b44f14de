"""TRL's side of agentenv: `AgentEnvRollouts`, a `rollout_func` for TRL's
GRPOTrainer that plays each prompt of rows written by `agentenv skyrl rows`
as one episode on an `agentenv serve` server, and its reward function,
which returns the env's reward and logs agentenv's metrics
(docs/training-trl.md).

Nothing here imports TRL.
"""

from .rollout import AgentEnvRollouts

__version__ = "0.1.0"
__all__ = ["AgentEnvRollouts"]
