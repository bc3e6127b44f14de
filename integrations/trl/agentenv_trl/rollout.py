"""AgentEnvRollouts: a `rollout_func` for TRL's GRPOTrainer.

TRL calls `rollout_func(prompts, trainer)` with the prompts of this process's
share of a generation batch (each as often as it is to be played) and trains
on the `prompt_ids`, `completion_ids` and `logprobs` it returns, masked by
`env_mask`; every other key reaches the reward functions as a column. Here
each prompt is the prompt of a row written by `agentenv skyrl rows` (its
tools in its system message), found in the rows this was given, and played
as one episode on the row's server:

- the prompt is rendered with the trainer's tokenizer and chat template
  kwargs, as TRL renders a dataset's prompt, with a generation prompt;
- every turn, the replies of all rollouts still playing are generated in one
  call (vLLM through the trainer by default), each reply is sent to the
  server as a step, and the tool messages it answers are appended as the
  template renders them, with env_mask 0 and logprob 0;
- the env's reward and metrics come back as `agentenv_reward` and
  `agentenv_metrics`; `reward_func` hands the reward to TRL and logs the
  metrics' means through TRL's `log_metric` as `agentenv/<key>`.

A rollout the env failed is played again (agentenv_episode's rule); one
that failed every attempt comes back with an all-zero env_mask and reward
None, which TRL counts as unscorable: out of its group's baseline, with
advantage 0.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from agentenv_episode import AgentEnvError, Episode, Replays, Row

log = logging.getLogger("agentenv_trl")

# generate(trainer, contexts) -> (completion token ids, their logprobs), one per context.
Generate = Callable[[Any, List[List[int]]], Tuple[List[List[int]], List[List[float]]]]

_SYSTEM = {"role": "system", "content": "agentenv"}
_USER = {"role": "user", "content": "agentenv"}
# With reasoning_content, templates that show a reply's reasoning only while
# it is the last message (Qwen3's) render it the same once tool messages follow.
_ASSISTANT = {"role": "assistant", "content": "agentenv", "reasoning_content": "agentenv"}


def vllm_generate(trainer, contexts: List[List[int]]) -> Tuple[List[List[int]], List[List[float]]]:
    """One completion per context from the trainer's vLLM (use_vllm=True),
    with the sampled token's logprob, as TRL's own single-turn path takes it."""
    _, completion_ids, logprobs, _ = trainer.vllm_generation.generate(prompts=contexts, images=None, num_generations=1)
    return completion_ids, [[lp[0] for lp in seq] for seq in logprobs]


class AgentEnvRollouts:
    """The rollout function (call it as TRL does) and `reward_func`."""

    def __init__(self, rows: Iterable[Mapping[str, Any]], *, max_turns: int = 4, generate: Optional[Generate] = None,
                 max_completion_length: Optional[int] = None):
        self.max_turns = max_turns
        self.generate = generate or vllm_generate
        self.max_completion_length = max_completion_length
        self._rows: Dict[str, Row] = {}
        for row in rows:
            key = _key(row["prompt"])
            parsed = Row.from_extras(row)
            known = self._rows.get(key)
            if known is not None and known.task_id != parsed.task_id:
                raise AgentEnvError(
                    f"tasks {known.task_id} and {parsed.task_id} have the same prompt: a rollout function gets only the prompt, "
                    f"so it cannot tell which to play; give them different prompts or train on one of them")
            self._rows[key] = parsed
        self.reward_func = self._reward_func()

    def __call__(self, prompts: Sequence[Any], trainer) -> Dict[str, List[Any]]:
        tokenizer = trainer.processing_class
        kwargs = dict(getattr(trainer, "chat_template_kwargs", None) or {})
        limit = self.max_completion_length or getattr(getattr(trainer, "args", None), "max_completion_length", None)
        rollouts = [_Rollout(self._row(p), p, tokenizer, kwargs, self.max_turns, limit) for p in prompts]
        asyncio.run(self._play(rollouts, trainer))
        return {
            "prompt_ids": [r.prompt_ids for r in rollouts],
            "completion_ids": [r.completion_ids for r in rollouts],
            "logprobs": [r.logprobs for r in rollouts],
            "env_mask": [r.env_mask for r in rollouts],
            "agentenv_reward": [r.reward for r in rollouts],
            "agentenv_metrics": [r.metrics for r in rollouts],
        }

    async def _play(self, rollouts: List["_Rollout"], trainer) -> None:
        try:
            await asyncio.gather(*(r.start() for r in rollouts))
            while True:
                playing = [r for r in rollouts if r.playing]
                if not playing:
                    return
                completions, logprobs = self.generate(trainer, [r.context() for r in playing])
                await asyncio.gather(*(r.take(c, lp) for r, c, lp in zip(playing, completions, logprobs)))
        finally:
            await asyncio.gather(*(r.close() for r in rollouts), return_exceptions=True)

    def _row(self, prompt: Any) -> Row:
        row = self._rows.get(_key(prompt))
        if row is None:
            raise AgentEnvError(
                "a prompt TRL asked for is in none of the rows AgentEnvRollouts was given: build it from the same "
                "dataset the trainer trains on (the parquet files `agentenv skyrl rows` wrote)")
        return row

    def _reward_func(self):
        def agentenv(prompts=None, completions=None, completion_ids=None, agentenv_reward=None, agentenv_metrics=None,
                     log_metric=None, **kwargs) -> List[Optional[float]]:
            """The env's reward of each rollout (None for one the env failed
            on every attempt); logs the metrics' means as agentenv/<key>."""
            if agentenv_reward is None:
                raise AgentEnvError("the agentenv reward function scores rollouts played by AgentEnvRollouts: pass it as rollout_func")
            if log_metric is not None and agentenv_metrics:
                sums: Dict[str, List[float]] = {}
                for m in agentenv_metrics:
                    for k, v in (m or {}).items():
                        sums.setdefault(k, []).append(float(v))
                for k in sorted(sums):
                    log_metric(f"agentenv/{k}", sum(sums[k]) / len(sums[k]))
            return list(agentenv_reward)

        return agentenv


class _Rollout:
    """One prompt's rollout: its attempts, tokens, mask, reward and metrics."""

    def __init__(self, row: Row, prompt: Any, tokenizer, kwargs: Dict[str, Any], max_turns: int, limit: Optional[int]):
        self.row, self.tokenizer, self.kwargs, self.max_turns, self.limit = row, tokenizer, kwargs, max_turns, limit
        self.prompt_ids = _ids(tokenizer.apply_chat_template(list(prompt), tokenize=True, add_generation_prompt=True, **kwargs))
        self.replays = Replays(row)
        self.episode: Optional[Episode] = None
        self.playing = False
        self.reward: Optional[float] = None
        self.metrics: Dict[str, float] = {}
        self._separator: Optional[Tuple[int, List[int]]] = None

    async def start(self) -> None:
        attempt = self.replays.next()
        self.completion_ids: List[int] = []
        self.logprobs: List[float] = []
        self.env_mask: List[int] = []
        self.episode = Episode(self.row, max_turns=self.max_turns, attempt=attempt, deadline=self.replays.deadline, trainer="trl")
        await self.episode.astart()
        self.playing = self.episode.failure is None
        if not self.playing:
            await self._finish()

    def context(self) -> List[int]:
        return self.prompt_ids + self.completion_ids

    async def take(self, completion: List[int], logprobs: List[float]) -> None:
        completion = list(completion)
        self.completion_ids += completion
        self.logprobs += list(logprobs)
        self.env_mask += [1] * len(completion)
        reply = self.tokenizer.decode(completion, skip_special_tokens=False)
        step = await self.episode.astep(reply)
        if step.done:
            await self._finish()
            return
        tool_ids = self._tool_tokens(step.messages, completion)
        if self.limit and len(self.completion_ids) + len(tool_ids) >= self.limit:
            await self._finish(truncated=True)
            return
        self.completion_ids += tool_ids
        self.logprobs += [0.0] * len(tool_ids)
        self.env_mask += [0] * len(tool_ids)

    async def _finish(self, truncated: bool = False) -> None:
        episode = self.episode
        failed = episode.failure is not None
        await episode.aclose()
        if failed and self.replays.again(True):
            await self.start()
            return
        self.playing = False
        self.metrics = dict(episode.metrics, attempts=self.replays.attempt, failed=1 if failed else 0, truncated=1 if truncated else 0)
        if failed:
            self.env_mask = [0] * len(self.env_mask)
            self.reward = None
            log.warning("agentenv: %s failed on all %d attempts; masked, and unscored for TRL", self.row.where(), self.replays.attempt)
        else:
            self.reward = episode.reward if episode.done else 0.0

    async def close(self) -> None:
        if self.episode is not None:
            await self.episode.aclose()

    def _tool_tokens(self, messages: List[Dict[str, str]], completion: List[int]) -> List[int]:
        """The tool messages as the chat template renders them after a model
        turn, then the next generation prompt: the suffix a rendering gains
        from them, after what the template puts between the end of a reply
        and the next turn (Qwen's newline after <|im_end|>), which the model
        stops before generating."""
        base = [_SYSTEM, _USER, _ASSISTANT]
        before = self._render(base, False)
        after = self._render(base + messages, True)
        if after[: len(before)] != before:
            raise AgentEnvError("the chat template renders a conversation differently once tool messages follow it; "
                                "agentenv cannot append them as tokens")
        return self._turn_separator(before, completion) + after[len(before):]

    def _turn_separator(self, rendered: List[int], completion: List[int]) -> List[int]:
        if not completion:
            return []
        last = completion[-1]
        tail = rendered[-3:]
        if last in tail:  # the reply ended its turn; the template adds what follows the end token
            return tail[len(tail) - tail[::-1].index(last):]
        return []

    def _render(self, messages, generation_prompt: bool) -> List[int]:
        return _ids(self.tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=generation_prompt, **self.kwargs))


def _ids(rendered: Any) -> List[int]:
    # transformers 5 returns a BatchEncoding-like mapping, 4 a list.
    if isinstance(rendered, Mapping):
        rendered = rendered["input_ids"]
    return list(rendered)


def _key(prompt: Any) -> str:
    return json.dumps([{"role": m["role"], "content": m["content"]} for m in prompt], ensure_ascii=False)
