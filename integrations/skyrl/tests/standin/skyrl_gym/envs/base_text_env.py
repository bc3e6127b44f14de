"""Stand-in for skyrl_gym.envs.base_text_env."""

from typing import Any, Dict, List, Optional, TypedDict

from skyrl_gym.core import Env


class BaseTextEnvStepOutput(TypedDict):
    observations: List[Dict[str, str]]
    reward: float
    done: bool
    metadata: Dict[str, Any]
    postprocessed_action: Optional[str]


class BaseTextEnv(Env):
    def __init__(self):
        super().__init__()
        self.turns = 0
        self.max_turns = 1

    def init(self, prompt):
        return prompt, {}

    def get_metrics(self) -> Dict[str, Any]:
        return {}

    @staticmethod
    def aggregate_metrics(metrics):
        from skyrl_gym.metrics import default_aggregate_metrics

        return default_aggregate_metrics(metrics)
