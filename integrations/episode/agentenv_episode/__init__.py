"""The part of agentenv's trainer integrations that is the same for every
trainer: a row as `agentenv skyrl rows` writes it (`Row`), one WebSocket
session per episode on an `agentenv serve` server (`Session`), one attempt
at a rollout (`Episode`) and the replay rule (`Replays`).

agentenv_skyrl, agentenv_verl and agentenv_trl build on it; it imports no
trainer.
"""

from .episode import COUNTS, PHASES, Episode, Step
from .replay import Replays
from .rows import ENV_ID, AgentEnvError, Row
from .session import EpisodeFailed, ServerError, Session

__version__ = "0.1.0"
__all__ = ["COUNTS", "PHASES", "ENV_ID", "AgentEnvError", "Episode", "EpisodeFailed", "Replays", "Row", "ServerError", "Session", "Step"]
