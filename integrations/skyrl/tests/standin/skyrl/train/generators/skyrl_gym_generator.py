"""Stand-in for SkyRLGymGenerator: the per-rollout loop and generate's output.

What it keeps from SkyRL's (see ../../../README.md): the env made inline on
the event loop with env_config and extras (extras["max_turns"] set from the
config), init/step/close in a ThreadPoolExecutor of max_env_workers,
get_metrics inline once the loop ends, the input-length guard before each
generation, loss mask 1 on generated tokens and 0 on observations, each
step's reward at its turn's last token, the trailing observation dropped,
and no try/finally around the env.
"""

import asyncio
import copy
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import skyrl_gym
from skyrl.train.generators.utils import get_rollout_metrics


@dataclass
class TrajectoryOutput:
    response_ids: List[int]
    reward: Any
    stop_reason: str
    loss_mask: List[int]
    prompt_ids: List[int]
    rollout_logprobs: Optional[List[float]]
    env_metrics: Dict[str, Any]
    e2e_time: Optional[float] = None
    time_splits: Optional[Dict[str, float]] = None


class SkyRLGymGenerator:
    def __init__(self, generator_cfg, skyrl_gym_cfg, inference_engine_client, tokenizer, policy_model_name=None):
        self.generator_cfg = generator_cfg
        self.skyrl_gym_cfg = skyrl_gym_cfg
        self.inference_engine_client = inference_engine_client
        self.tokenizer = tokenizer
        self.max_turns = generator_cfg.max_turns
        self.batched = generator_cfg.batched
        workers = skyrl_gym_cfg.max_env_workers
        self.env_executor = ThreadPoolExecutor(max_workers=workers) if workers > 0 else None

    async def _run(self, fn, *args):
        if self.env_executor is None:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(self.env_executor, fn, *args)

    async def agent_loop(self, prompt, env_class, env_extras, max_tokens, max_input_length,
                         sampling_params=None, trajectory_id=None, cache_salt=None):
        start = time.monotonic()
        splits = {"llm": 0.0, "env": 0.0}
        env_extras["max_turns"] = self.max_turns
        env_config = getattr(self.skyrl_gym_cfg, env_class, dict())
        env = skyrl_gym.make(env_class, env_config=env_config, extras=env_extras)
        chat_history, _ = await self._run(env.init, copy.deepcopy(prompt))
        input_ids = self.tokenizer.apply_chat_template(chat_history, add_generation_prompt=True)
        prompt_len = len(input_ids)
        loss_mask: List[int] = []
        logprobs: List[float] = []
        per_step = []
        end = None
        stop_reason = "stop"
        done = False
        while not done:
            if len(input_ids) > max_input_length:
                stop_reason = "length"
                break
            t = time.monotonic()
            out = await self.inference_engine_client.generate({"prompt_token_ids": [input_ids], "trajectory_id": trajectory_id})
            splits["llm"] += time.monotonic() - t
            text, ids, stop_reason = out["responses"][0], out["response_ids"][0], out["stop_reasons"][0]
            t = time.monotonic()
            step = await self._run(env.step, text)
            splits["env"] += time.monotonic() - t
            done = step["done"]
            obs_ids = self.tokenizer.apply_chat_template(step["observations"], add_generation_prompt=not done) if step["observations"] else []
            input_ids = input_ids + ids + obs_ids
            loss_mask += [1] * len(ids) + [0] * len(obs_ids)
            logprobs += [0.0] * (len(ids) + len(obs_ids))
            end = len(input_ids) - len(obs_ids) - 1
            per_step.append((step["reward"], end - prompt_len))
        env_metrics = env.get_metrics()
        await self._run(env.close)
        cut = (end - prompt_len + 1) if end is not None else 0
        response_ids = input_ids[prompt_len:prompt_len + cut]
        rewards = [0.0] * len(response_ids)
        for reward, idx in per_step:
            if idx < len(rewards):
                rewards[idx] += reward
        return TrajectoryOutput(response_ids=response_ids, reward=rewards, stop_reason=stop_reason,
                                loss_mask=loss_mask[:cut], prompt_ids=input_ids[:prompt_len],
                                rollout_logprobs=logprobs[:cut], env_metrics=env_metrics,
                                e2e_time=time.monotonic() - start, time_splits=splits)

    async def generate(self, input_batch, disable_tqdm=False):
        ids = input_batch.get("trajectory_ids")
        outs = await asyncio.gather(*[
            self.agent_loop(input_batch["prompts"][i], input_batch["env_classes"][i], input_batch["env_extras"][i],
                            1024, self.generator_cfg.max_input_length,
                            sampling_params=input_batch.get("sampling_params"),
                            trajectory_id=ids[i] if ids is not None else None)
            for i in range(len(input_batch["prompts"]))
        ])
        responses = [o.response_ids for o in outs]
        rewards = [o.reward for o in outs]
        env_metrics = [o.env_metrics for o in outs]
        splits = {name: [o.time_splits[name] for o in outs] for name in ("llm", "env")}
        return {
            "prompt_token_ids": [o.prompt_ids for o in outs],
            "response_ids": responses,
            "rewards": rewards,
            "loss_masks": [o.loss_mask for o in outs],
            "stop_reasons": [o.stop_reason for o in outs],
            "rollout_metrics": get_rollout_metrics(responses, rewards, env_metrics, input_batch["env_classes"],
                                                   [o.loss_mask for o in outs], None, splits),
            "rollout_logprobs": [o.rollout_logprobs for o in outs],
            "trajectory_ids": None,
            "trajectory_generation_times": [o.e2e_time for o in outs],
            "trajectory_time_splits": splits,
            "is_last_step": None,
            "env_metrics": env_metrics,
        }
