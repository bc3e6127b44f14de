"""Stand-in for trl.trainer.grpo_trainer.GRPOTrainer, written from TRL's
source at the commit in tests/standin/README.md (never copied), cut to the
rollout_func path:

- `_generate`: calls `rollout_func(prompts, self)`; refuses an output
  without prompt_ids, completion_ids or logprobs; every other key is an
  extra field; `env_mask` is popped as the tool mask (no `tools` given);
  completion lengths are counted over mask-1 tokens;
- `_generate_and_score_completions`: prompts from the inputs; extra fields
  merged into each input as a column; `_calculate_rewards`; a row every
  reward function scored None is unscorable (NaN, out of the group's mean
  and std, advantage 0); metrics logged through `log_metric` flushed as
  their mean into `_metrics[mode][name]`; the loss mask is the completion
  mask times the tool mask;
- `_calculate_rewards`: calls each (sync) reward function with prompts,
  completions, completion_ids and every input column, plus trainer_state,
  log_extra and log_metric; None becomes NaN.
"""

import math
from collections import defaultdict
from typing import Any, Callable, Dict, List  # noqa: F401

RolloutFunc = Callable[[list[str], "GRPOTrainer"], dict[str, Any]]


class GRPOTrainer:
    def __init__(self, model, reward_funcs=None, args=None, train_dataset=None, eval_dataset=None, processing_class=None,
                 reward_processing_classes=None, callbacks=None, optimizers=(None, None), quantization_config=None,
                 peft_config=None, tools=None, rollout_func: RolloutFunc = None, environment_factory=None):
        self.reward_funcs = reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
        self.reward_func_names = [f.__name__ for f in self.reward_funcs]
        self.args = args
        self.processing_class = processing_class
        self.rollout_func = rollout_func
        self.tools = tools
        self.chat_template_kwargs = getattr(args, "chat_template_kwargs", None) or {}
        self.num_generations = getattr(args, "num_generations", 1)
        self.state = None
        self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
        self._pending_metrics = defaultdict(list)
        self.training = True

    def _log_metric(self, name: str, value: float):
        self._pending_metrics[name].append(value)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        keys = [key for key in inputs[0] if key not in ["prompt", "completion", "completion_ids"]]
        reward_kwargs = {key: [example[key] for example in inputs] for key in keys}
        reward_kwargs["trainer_state"] = self.state
        reward_kwargs["log_extra"] = lambda column, values: None
        reward_kwargs["log_metric"] = self._log_metric
        rewards = []
        for func in self.reward_funcs:
            out = func(prompts=prompts, completions=completions, completion_ids=completion_ids_list, **reward_kwargs)
            rewards.append([math.nan if r is None else float(r) for r in out])
        return [list(row) for row in zip(*rewards)]  # rows x functions

    def _generate(self, prompts: list):
        output = self.rollout_func(prompts, self)
        required = {"prompt_ids", "completion_ids", "logprobs"}
        missing = required - output.keys()
        if missing:
            raise ValueError(f"rollout_func must return keys {sorted(missing)} in its output dict.")
        extra_fields = {k: v for k, v in output.items() if k not in required}
        tool_mask = None if self.tools else extra_fields.pop("env_mask", None)
        completion_lengths = [sum(m) for m in tool_mask] if tool_mask is not None else [len(c) for c in output["completion_ids"]]
        mode = "train" if self.training else "eval"
        self._metrics[mode]["completions/mean_length"].append(sum(completion_lengths) / len(completion_lengths))
        return output["prompt_ids"], output["completion_ids"], tool_mask, output["logprobs"], extra_fields

    def _generate_and_score_completions(self, inputs):
        mode = "train" if self.training else "eval"
        prompts = [x["prompt"] for x in inputs]
        prompt_ids, completion_ids, tool_mask, logprobs, extra_fields = self._generate(prompts)
        for i, inp in enumerate(inputs):
            for key, values in extra_fields.items():
                if isinstance(values, list) and i < len(values):
                    inp[key] = values[i]
                elif not isinstance(values, list):
                    inp[key] = values
        completions = [[{"role": "assistant", "content": self.processing_class.decode(c)}] for c in completion_ids]
        per_func = self._calculate_rewards(inputs, prompts, completions, completion_ids)
        unscorable = [all(math.isnan(r) for r in row) for row in per_func]
        rewards = [math.nan if u else sum(r for r in row if not math.isnan(r)) for row, u in zip(per_func, unscorable)]
        advantages = []
        g = self.num_generations
        for start in range(0, len(rewards), g):
            group = rewards[start:start + g]
            scored = [r for r in group if not math.isnan(r)]
            mean = sum(scored) / len(scored) if scored else 0.0
            advantages += [0.0 if math.isnan(r) else r - mean for r in group]
        for name in sorted(self._pending_metrics):
            values = self._pending_metrics[name]
            self._metrics[mode][name].append(sum(values) / len(values))
        self._pending_metrics.clear()
        for i, name in enumerate(self.reward_func_names):
            col = [row[i] for row in per_func if not math.isnan(row[i])]
            self._metrics[mode][f"rewards/{name}/mean"].append(sum(col) / len(col) if col else math.nan)
        loss_mask = [[1] * len(c) for c in completion_ids] if tool_mask is None else tool_mask
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "loss_mask": loss_mask, "logprobs": logprobs,
                "rewards": rewards, "advantages": advantages}
