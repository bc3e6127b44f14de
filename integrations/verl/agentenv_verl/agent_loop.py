"""AgentEnvAgentLoop: a verl agent loop that plays a row's task as one episode
on an `agentenv serve` server, one WebSocket session per attempt.

verl instantiates an agent loop per rollout and awaits its `run()` on the
agent loop worker's event loop, with the row's columns as keyword
arguments. The loop renders the row's prompt with verl's own Continuous Token
helpers (the tools are already in the row's system message, as
`agentenv skyrl rows` wrote them, so no `tools=`), generates token in, token
out through verl's server manager, sends each decoded reply to the server as
a step, and merges the tool messages it answers with mask 0. agentenv reads
the tool calls, runs them and scores the episode: the output carries
`reward_score`, so verl runs no reward function of its own.

The session runs on agentenv_episode's private event loop and is awaited
from verl's, which it never blocks.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Dict, List, Optional

from agentenv_episode import COUNTS, PHASES, Episode, Replays, Row
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from . import AGENT_NAME

log = logging.getLogger("agentenv_verl")

# The keys every rollout reports in extra_fields["reward_extra_info"], which
# verl logs in validation as val-aux/<data_source>/<key>/mean@<n>. verl takes
# the keys of a worker's batch from its first rollout and reads each from
# every other, so every rollout reports all of these, and the score keys
# seen so far in this process (0 where its episode recorded none).
FIXED_KEYS = ("attempts", "failed", "truncated") + COUNTS + tuple(f"time/{p}" for p in PHASES)


@register(AGENT_NAME)
class AgentEnvAgentLoop(AgentLoopBase):
    """One rollout of a row written by `agentenv skyrl rows`, played on the
    server in its `server.url`; replayed when the env fails it, masked when
    every attempt failed."""

    # score/<step id> keys seen by this process's rollouts.
    _score_keys: set = set()

    def __init__(self, *args, tools: Any = None, **kwargs):
        # verl hands every agent loop its configured tool list; agentenv's
        # tools are the row's, served by the env, so the list is not used.
        super().__init__(*args, **kwargs)
        multi_turn = self.rollout_config.multi_turn
        self.max_turns = int(_get(multi_turn, "max_assistant_turns") or 0)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: Dict[str, Any], **kwargs) -> AgentLoopOutput:
        row = Row.from_extras(kwargs)
        raw_prompt = [dict(m) for m in kwargs["raw_prompt"]]
        replays = Replays(row)
        while True:
            attempt = replays.next()
            played = await self._attempt(row, raw_prompt, sampling_params, attempt, replays.deadline)
            if not replays.again(played.failed):
                break
        return played.output(attempt, self._keys(played.metrics))

    async def _attempt(self, row: Row, raw_prompt: List[Dict[str, Any]], sampling_params: Dict[str, Any],
                       attempt: int, deadline: float) -> "_Played":
        messages = list(raw_prompt)
        # The prompt as verl renders a dataset's: the row's messages, its
        # tools already in the system message, with the data config's
        # apply_chat_template_kwargs and a generation prompt.
        runtime = await self.ct_build_initial_tokens(messages)
        prompt_length = len(runtime)
        mask: List[int] = []
        logprobs: Optional[List[float]] = None
        played = _Played(prompt_length)
        episode = Episode(row, max_turns=self.max_turns, attempt=attempt, deadline=deadline, trainer="verl")
        request_id = uuid.uuid4().hex
        try:
            began = time.monotonic()
            await episode.astart()
            played.env_s += time.monotonic() - began
            while episode.failure is None:
                began = time.monotonic()
                out = await self.server_manager.generate(request_id=request_id, prompt_ids=runtime, sampling_params=sampling_params)
                played.generate_s += time.monotonic() - began
                played.replies += 1
                if out.num_preempted is not None:
                    played.preempted = max(played.preempted, 0) + out.num_preempted
                if logprobs is None and out.log_probs:
                    logprobs = [0.0] * len(mask)
                merged, mask, logprobs = await self.ct_merge_assistant_token(
                    runtime, out.token_ids, mask, logprobs, assistant_logprobs=out.log_probs if logprobs is not None else None)
                runtime = merged.token_ids
                reply = self.tokenizer.decode(out.token_ids, skip_special_tokens=False)
                began = time.monotonic()
                step = await episode.astep(reply)
                played.env_s += time.monotonic() - began
                if step.done:
                    break
                if len(mask) >= self.response_length:
                    played.truncated = True  # the episode is left unfinished and scores 0
                    break
                played.tool_rounds += 1
                before = messages + [{"role": "assistant", "content": reply}]
                messages = before + step.messages
                merged, mask, logprobs = await self.ct_merge_non_assistant_msg(before, messages, runtime, mask, logprobs)
                runtime = merged.token_ids
                if len(mask) >= self.response_length:
                    played.truncated = True
                    break
        finally:
            await episode.aclose()
        played.set(runtime, mask, logprobs, episode, self.response_length)
        return played

    def _keys(self, metrics: Dict[str, float]) -> List[str]:
        cls = type(self)
        cls._score_keys.update(k for k in metrics if k.startswith("score/"))
        return list(FIXED_KEYS) + sorted(cls._score_keys)


class _Played:
    """One attempt's tokens, mask, reward and metrics."""

    def __init__(self, prompt_length: int):
        self.prompt_length = prompt_length
        self.generate_s = self.env_s = 0.0
        self.replies = self.tool_rounds = 0
        self.preempted = -1
        self.truncated = False
        self.failed = False
        self.reward = 0.0
        self.metrics: Dict[str, float] = {}

    def set(self, runtime: List[int], mask: List[int], logprobs: Optional[List[float]], episode: Episode, limit: int) -> None:
        self.prompt_ids = runtime[: len(runtime) - len(mask)]
        self.response_ids = runtime[len(runtime) - len(mask):][:limit]
        self.mask = mask[:limit]
        self.logprobs = logprobs[:limit] if logprobs is not None else None
        self.failed = episode.failure is not None
        self.reward = episode.reward if episode.done else 0.0
        self.metrics = dict(episode.metrics)

    def output(self, attempts: int, keys: List[str]) -> AgentLoopOutput:
        info = {k: 0.0 for k in keys}
        info.update({k: float(v) for k, v in self.metrics.items() if k in info})
        info["attempts"] = float(attempts)
        info["failed"] = 1.0 if self.failed else 0.0
        info["truncated"] = 1.0 if self.truncated else 0.0
        mask = [0] * len(self.mask) if self.failed else self.mask
        if self.failed:
            log.warning("agentenv: a rollout failed on all %d attempts; its response mask is all zero", attempts)
        return AgentLoopOutput(
            prompt_ids=self.prompt_ids,
            response_ids=self.response_ids,
            response_mask=mask,
            response_logprobs=self.logprobs,
            reward_score=0.0 if self.failed else self.reward,
            # As verl's tool agent loop counts: the prompt, each reply, each round of tool messages.
            num_turns=1 + self.replies + self.tool_rounds,
            metrics=AgentLoopMetrics(generate_sequences=self.generate_s, tool_calls=self.env_s, num_preempted=self.preempted),
            extra_fields={"reward_extra_info": info},
        )


def _get(config: Any, key: str) -> Any:
    getter = getattr(config, "get", None)
    return getter(key) if getter is not None else getattr(config, key, None)
