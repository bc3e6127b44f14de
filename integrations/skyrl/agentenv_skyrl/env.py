"""AgentEnvTextEnv: a skyrl-gym BaseTextEnv that plays a row's task as one
episode on an `agentenv serve` server, one WebSocket session per rollout.

SkyRL runs `__init__` and `get_metrics` inline on its event loop, so neither
touches the network; `init`, `step` and `close` run in its env threads.
"""

from __future__ import annotations

import logging
import time
import uuid
import weakref
from typing import Any, Dict, List, Mapping, Optional, Tuple

from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from .rows import ROLLOUT_KEY, AgentEnvError, Row
from .session import EpisodeFailed, ServerError, Session

log = logging.getLogger("agentenv_skyrl")

# The metrics the env reports for each rollout; aggregate_metrics logs their
# means as avg_<key>, which SkyRL prefixes with environment/.
_COUNTS = ("tool_calls", "unparsed_calls")
# The phases of the final observation's `times` passed on as time/<phase>
# (seconds): SkyRL logs environment/avg_time/deploy beside its own
# generate/trajectory_time_env_*. The teardown runs after the episode, so it
# is only in the server's metrics.
_PHASES = ("queue", "deploy", "ready", "setup", "step", "tool", "verify")


class AgentEnvTextEnv(BaseTextEnv):
    def __init__(self, env_config: Optional[Mapping[str, Any]] = None, extras: Optional[Mapping[str, Any]] = None):
        super().__init__()
        extras = extras or {}
        self.row = Row.from_extras(extras)
        self.max_turns = int(extras.get("max_turns") or 0)  # SkyRL's generator.max_turns
        rollout = extras.get(ROLLOUT_KEY) or {}
        self._deadline = rollout.get("deadline")  # time.monotonic(); AgentEnvGenerator's
        self._attempt = int(rollout.get("attempt", 1))
        self._label = str(rollout.get("trajectory") or "")
        self._session: Optional[Session] = None
        self._done = False
        self._failure: Optional[str] = None
        self._metrics: Dict[str, float] = {"attempts": 1, "failed": 0}

    # -- BaseTextEnv ------------------------------------------------------

    def init(self, prompt: List[Dict[str, str]]) -> Tuple[List[Dict[str, str]], Dict[str, Any]]:
        """Opens the session and resets the row's task. The prompt is the
        row's (its tools already in the system message), returned as given."""
        deadline = self._deadline if self._deadline is not None else time.monotonic() + self.row.reset_timeout
        session = Session(self.row.url, self.row.token(), self.row.reset_timeout)
        self._session = session
        # SkyRL skips close() when a rollout raises: close with the env.
        weakref.finalize(self, session.close)
        reset = {
            "split": self.row.split,
            "index": self.row.index,
            "tool_format": self.row.tool_format,
            "max_turns": self.max_turns,
            "episode_id": self._episode_id(),
        }
        try:
            data = session.start(reset, deadline)
            observation = data.get("observation") or {}
            if observation.get("task_id") != self.row.task_id:
                raise AgentEnvError(
                    f"{self.row.where()}: the server's {self.row.split}[{self.row.index}] is task "
                    f"{observation.get('task_id')!r}: the rows were written for another version of the bundle; write them again"
                )
            self._check_tools(observation)
        except EpisodeFailed as e:
            self._fail(f"starting the episode: {e}")
        except AgentEnvError:
            self.close()
            raise
        return prompt, {}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        if self._failure is not None or self._session is None:
            self._fail(self._failure or "step before init")
            return _output([], 0.0, True)
        try:
            data = self._session.step(action)
            observation = data.get("observation") or {}
            self._check_tools(observation)
            done = bool(data.get("done"))
            if not done and self.max_turns and self.turns >= self.max_turns:
                raise EpisodeFailed(f"the server left the episode open after max_turns ({self.max_turns}) replies")
        except EpisodeFailed as e:
            self._fail(f"step {self.turns}: {e}")
            return _output([], 0.0, True)
        except ServerError as e:
            if e.code == "UNSCORED":
                self.close()
                raise AgentEnvError(
                    f"{self.row.where()}: the episode ended unscored ({e.message}); no replay changes that: fix the task's verifiers"
                ) from None
            self._fail(f"step {self.turns}: {e}")
            return _output([], 0.0, True)
        except AgentEnvError:
            self.close()
            raise
        messages = [{"role": str(m.get("role")), "content": str(m.get("content", ""))} for m in observation.get("messages") or []]
        if not done:
            return _output(messages, 0.0, False)
        reward = data.get("reward")
        if not isinstance(reward, (int, float)) or isinstance(reward, bool):
            self.close()
            raise AgentEnvError(f"{self.row.where()}: the episode ended without a reward ({reward!r}); no replay changes that")
        self._done = True
        self._record(observation.get("metrics") or {}, observation.get("times") or {})
        return _output(messages, float(reward), True)

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def get_metrics(self) -> Dict[str, Any]:
        # Inline on SkyRL's event loop: no network, only what the steps kept.
        return dict(self._metrics)

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

    # -- helpers ----------------------------------------------------------

    @property
    def failure(self) -> Optional[str]:
        """Why the env failed this attempt, or None."""
        return self._failure

    def _fail(self, why: str) -> None:
        if self._failure is None:
            self._failure = why
            log.warning(
                "agentenv env failed %s (attempt %d%s): %s",
                self.row.where(), self._attempt, f", rollout {self._label}" if self._label else "", why,
            )
        self._metrics = {"attempts": 1, "failed": 1}
        self.close()

    def _record(self, metrics: Mapping[str, Any], times: Mapping[str, Any]) -> None:
        kept: Dict[str, float] = {"attempts": 1, "failed": 0}
        for key, value in metrics.items():
            if (key.startswith("score/") or key in _COUNTS) and _number(value):
                kept[key] = float(value)
        if isinstance(times, Mapping):
            for phase in _PHASES:
                if _number(times.get(phase)):
                    kept[f"time/{phase}"] = float(times[phase])
        self._metrics = kept

    def _check_tools(self, observation: Mapping[str, Any]) -> None:
        offered = [t.get("function", {}).get("name") for t in observation.get("tools") or [] if isinstance(t, Mapping)]
        extra = [name for name in offered if name not in self.row.tools]
        if extra:
            raise AgentEnvError(
                f"{self.row.where()} offers {', '.join(map(str, extra))}, which its row does not list "
                f"(the prompt shows the model {', '.join(self.row.tools) or 'no tools'}): no replay changes that; write the rows again"
            )

    def _episode_id(self) -> str:
        label = "".join(c if c.isalnum() or c in "-_." else "-" for c in self._label)[:120]
        return f"skyrl-{label + '-' if label else ''}a{self._attempt}-{uuid.uuid4().hex[:12]}"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _output(observations: List[Dict[str, str]], reward: float, done: bool) -> BaseTextEnvStepOutput:
    return BaseTextEnvStepOutput(observations=observations, reward=reward, done=done, metadata={}, postprocessed_action=None)
