"""AgentEnvTextEnv: a skyrl-gym BaseTextEnv that plays a row's task as one
episode on an `agentenv serve` server, one WebSocket session per rollout.

SkyRL runs `__init__` and `get_metrics` inline on its event loop, so neither
touches the network; `init`, `step` and `close` run in its env threads. The
episode itself (its checks, failures and metrics) is agentenv_episode's, as
for every trainer.
"""

from __future__ import annotations

import weakref
from typing import Any, Dict, List, Mapping, Optional, Tuple

from agentenv_episode import Episode, Row
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from .extras import ROLLOUT_KEY


class AgentEnvTextEnv(BaseTextEnv):
    def __init__(self, env_config: Optional[Mapping[str, Any]] = None, extras: Optional[Mapping[str, Any]] = None):
        super().__init__()
        extras = extras or {}
        row = Row.from_extras(extras)
        rollout = extras.get(ROLLOUT_KEY) or {}
        # The episode this env plays: the deadline and attempt are
        # AgentEnvGenerator's; SkyRL's generator.max_turns is in extras.
        self._episode = Episode(
            row,
            max_turns=int(extras.get("max_turns") or 0),
            attempt=int(rollout.get("attempt", 1)),
            deadline=rollout.get("deadline"),
            trainer="skyrl",
            label=str(rollout.get("trajectory") or ""),
        )
        self.row = row
        self.max_turns = self._episode.max_turns

    # -- BaseTextEnv ------------------------------------------------------

    def init(self, prompt: List[Dict[str, str]]) -> Tuple[List[Dict[str, str]], Dict[str, Any]]:
        """Opens the session and resets the row's task. The prompt is the
        row's (its tools already in the system message), returned as given."""
        # SkyRL skips close() when a rollout raises: close with the env.
        weakref.finalize(self, self._episode.close)
        self._episode.start()
        return prompt, {}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        out = self._episode.step(action)
        return _output(out.messages, out.reward, out.done)

    def close(self) -> None:
        self._episode.close()

    def get_metrics(self) -> Dict[str, Any]:
        # Inline on SkyRL's event loop: no network, only what the steps kept.
        return dict(self._episode.metrics)

    @staticmethod
    def aggregate_metrics(metrics: List[Dict[str, Any]]) -> Dict[str, Any]:
        """The mean of each key over the rollouts that report it, named
        avg_<key>: where SkyRL joins groups' metrics (the fully async trainer
        does) it averages a key holding "avg" again instead of adding it up."""
        sums: Dict[str, List[float]] = {}
        for m in metrics:
            for key, value in m.items():
                if isinstance(value, (bool, int, float)):
                    sums.setdefault(key, []).append(float(value))
        return {f"avg_{key}": sum(v) / len(v) for key, v in sums.items()}

    @property
    def failure(self) -> Optional[str]:
        """Why the env failed this attempt, or None."""
        return self._episode.failure


def _output(observations: List[Dict[str, str]], reward: float, done: bool) -> BaseTextEnvStepOutput:
    return BaseTextEnvStepOutput(observations=observations, reward=reward, done=done, metadata={}, postprocessed_action=None)
