"""One attempt at a rollout: a session on the row's server, the row's task
reset, the model's replies sent as steps, the reward and metrics kept.

The trainers' integrations all play their rollouts through this class, so a
row means the same to each: the same checks (the server's task at the row's
split and index is the row's task, it offers only the tools the row lists),
the same failures (the env failed this attempt: `failure` says why, the step
ends the episode with reward 0 and `metrics` report `failed`), the same
refusals (`AgentEnvError`, which no replay changes) and the same metrics.

Each call has a blocking form (`start`, `step`, `close`) for threads and an
awaitable one (`astart`, `astep`, `aclose`) for event loops; both run the
same coroutine on the sessions' private loop (session.py).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from .rows import AgentEnvError, Row
from .session import EpisodeFailed, ServerError, Session, _Loop

log = logging.getLogger("agentenv_episode")

# The counts the final observation's metrics carry that every trainer logs.
COUNTS = ("tool_calls", "unparsed_calls")
# The phases of the final observation's `times` passed on as time/<phase>
# (seconds). The teardown runs after the episode, so it is only in the
# server's metrics.
PHASES = ("queue", "deploy", "ready", "setup", "step", "tool", "verify")


@dataclass
class Step:
    """What a reply brought: the tool messages to show the model next, and
    once the episode is over, `done` and its reward (0 when it failed)."""

    messages: List[Dict[str, str]] = field(default_factory=list)
    reward: float = 0.0
    done: bool = False


class Episode:
    """One episode of a row's task. Not thread-safe: a rollout's turns come
    one after another."""

    def __init__(self, row: Row, *, max_turns: int = 0, attempt: int = 1, deadline: Optional[float] = None,
                 trainer: str = "agentenv", label: str = ""):
        self.row = row
        self.max_turns = max_turns
        self.attempt = attempt
        self.deadline = deadline if deadline is not None else time.monotonic() + row.reset_timeout
        self.trainer = trainer
        self.label = label
        self.turns = 0
        self.done = False
        self.reward = 0.0
        self.failure: Optional[str] = None
        self.metrics: Dict[str, float] = {"attempts": 1, "failed": 0}
        self.session: Optional[Session] = None

    # -- blocking ---------------------------------------------------------

    def start(self) -> Dict[str, Any]:
        """Opens the session and resets the row's task; returns the reset's
        observation ({} when the env failed the attempt)."""
        return _Loop.run(self._start(), self._bound(self.deadline), "starting the episode")

    def step(self, reply: str) -> Step:
        return _Loop.run(self._step(reply), self._bound(time.monotonic() + self.row.reset_timeout), "the step")

    def close(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            session.close()

    # -- awaitable --------------------------------------------------------

    async def astart(self) -> Dict[str, Any]:
        return await _Loop.wait(self._start(), self._bound(self.deadline), "starting the episode")

    async def astep(self, reply: str) -> Step:
        return await _Loop.wait(self._step(reply), self._bound(time.monotonic() + self.row.reset_timeout), "the step")

    async def aclose(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            await session.aclose()

    # -- on the sessions' loop --------------------------------------------

    @staticmethod
    def _bound(deadline: float) -> float:
        # The coroutine keeps its own deadlines; this only guards the waiter.
        return max(0.0, deadline - time.monotonic()) + 60.0

    async def _start(self) -> Dict[str, Any]:
        session = Session(self.row.url, self.row.token(), self.row.reset_timeout)
        self.session = session
        reset = {
            "split": self.row.split,
            "index": self.row.index,
            "tool_format": self.row.tool_format,
            "max_turns": self.max_turns,
            "episode_id": self._episode_id(),
        }
        try:
            data = await session._start(reset, self.deadline)
            observation = data.get("observation") or {}
            if observation.get("task_id") != self.row.task_id:
                raise AgentEnvError(
                    f"{self.row.where()}: the server's {self.row.split}[{self.row.index}] is task "
                    f"{observation.get('task_id')!r}: the rows were written for another version of the bundle; write them again"
                )
            self._check_tools(observation)
            return observation
        except EpisodeFailed as e:
            await self._fail(f"starting the episode: {e}")
            return {}
        except AgentEnvError:
            await self._drop()
            raise

    async def _step(self, reply: str) -> Step:
        self.turns += 1
        if self.failure is not None or self.session is None:
            await self._fail(self.failure or "step before start")
            return Step(done=True)
        try:
            data = await self.session._step(reply)
            observation = data.get("observation") or {}
            self._check_tools(observation)
            done = bool(data.get("done"))
            if not done and self.max_turns and self.turns >= self.max_turns:
                raise EpisodeFailed(f"the server left the episode open after max_turns ({self.max_turns}) replies")
        except EpisodeFailed as e:
            await self._fail(f"step {self.turns}: {e}")
            return Step(done=True)
        except ServerError as e:
            if e.code == "UNSCORED":
                await self._drop()
                raise AgentEnvError(
                    f"{self.row.where()}: the episode ended unscored ({e.message}); no replay changes that: fix the task's verifiers"
                ) from None
            await self._fail(f"step {self.turns}: {e}")
            return Step(done=True)
        except AgentEnvError:
            await self._drop()
            raise
        messages = [{"role": str(m.get("role")), "content": str(m.get("content", ""))} for m in observation.get("messages") or []]
        if not done:
            return Step(messages=messages)
        reward = data.get("reward")
        if not _number(reward):
            await self._drop()
            raise AgentEnvError(f"{self.row.where()}: the episode ended without a reward ({reward!r}); no replay changes that")
        self.done = True
        self.reward = float(reward)
        self._record(observation.get("metrics") or {}, observation.get("times") or {})
        return Step(messages=messages, reward=self.reward, done=True)

    async def _drop(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            await session._drop()

    async def _fail(self, why: str) -> None:
        if self.failure is None:
            self.failure = why
            log.warning(
                "agentenv env failed %s (%s, attempt %d%s): %s",
                self.row.where(), self.trainer, self.attempt, f", rollout {self.label}" if self.label else "", why,
            )
        self.metrics = {"attempts": 1, "failed": 1}
        await self._drop()

    def _record(self, metrics: Mapping[str, Any], times: Mapping[str, Any]) -> None:
        kept: Dict[str, float] = {"attempts": 1, "failed": 0}
        for key, value in metrics.items():
            if (key.startswith("score/") or key in COUNTS) and _number(value):
                kept[key] = float(value)
        if isinstance(times, Mapping):
            for phase in PHASES:
                if _number(times.get(phase)):
                    kept[f"time/{phase}"] = float(times[phase])
        self.metrics = kept

    def _check_tools(self, observation: Mapping[str, Any]) -> None:
        offered = [t.get("function", {}).get("name") for t in observation.get("tools") or [] if isinstance(t, Mapping)]
        extra = [name for name in offered if name not in self.row.tools]
        if extra:
            raise AgentEnvError(
                f"{self.row.where()} offers {', '.join(map(str, extra))}, which its row does not list "
                f"(the prompt shows the model {', '.join(self.row.tools) or 'no tools'}): no replay changes that; write the rows again"
            )

    def _episode_id(self) -> str:
        label = "".join(c if c.isalnum() or c in "-_." else "-" for c in self.label)[:120]
        return f"{self.trainer}-{label + '-' if label else ''}a{self.attempt}-{uuid.uuid4().hex[:12]}"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
