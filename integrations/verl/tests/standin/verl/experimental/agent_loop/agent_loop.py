"""Stand-in for verl.experimental.agent_loop.agent_loop, written from verl's
source at the commit in tests/standin/README.md (never copied):

- AgentLoopMetrics, AgentLoopOutput: the fields (pydantic models in verl:
  a dict for `metrics` keeps only AgentLoopMetrics' fields);
- AgentLoopBase: its constructor (what verl's worker passes it) and the
  Continuous Token helpers an agent loop calls (run off the event loop in
  an executor, as verl does);
- register / _agent_loop_registry, and AgentLoopWorker: verl's worker
  instantiating the registered loop per row (`agent_name`, else the
  configured default), awaiting run() for every row of a batch at once, and
  what its _postprocess makes of the outputs that the integration relies
  on: rm_scores from reward_score on the last response token, the
  reward_extra_info keys read from the first output for every output,
  `__num_turns__`, and the per-rollout metrics dumped for the
  agent_loop/<metric>/{min,max,mean} timings; plus the validation metric
  names (val-core/val-aux/<data_source>/<key>/mean@<n>).
"""

import asyncio
import importlib
from abc import ABC, abstractmethod
from typing import Any, Dict, List, Optional

from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

_METRIC_FIELDS = {"generate_sequences": 0.0, "tool_calls": 0.0, "compute_score": 0.0, "num_preempted": -1}


class AgentLoopMetrics:
    generate_sequences: float = 0.0
    tool_calls: float = 0.0
    compute_score: float = 0.0
    num_preempted: int = -1

    def __init__(self, **kwargs):
        for name, default in _METRIC_FIELDS.items():
            setattr(self, name, kwargs.get(name, default))  # pydantic ignores other keys

    def model_dump(self) -> Dict[str, Any]:
        return {name: getattr(self, name) for name in _METRIC_FIELDS}


_OUTPUT_FIELDS = ("prompt_ids", "response_ids", "response_mask", "response_logprobs", "routed_experts", "multi_modal_data",
                  "reward_score", "num_turns", "metrics", "extra_fields", "mm_processor_kwargs")
_REQUIRED = ("prompt_ids", "response_ids", "response_mask", "metrics")


class AgentLoopOutput:
    prompt_ids: List[int]
    response_ids: List[int]
    response_mask: List[int]
    response_logprobs: Optional[List[float]] = None
    routed_experts: Optional[Any] = None
    multi_modal_data: Optional[Dict[str, Any]] = None
    reward_score: Optional[float] = None
    num_turns: int = 0
    metrics: AgentLoopMetrics
    extra_fields: Dict[str, Any] = {}
    mm_processor_kwargs: Optional[Dict[str, Any]] = None

    def __init__(self, **kwargs):
        unknown = set(kwargs) - set(_OUTPUT_FIELDS)
        missing = [f for f in _REQUIRED if f not in kwargs]
        if missing:
            raise ValueError(f"AgentLoopOutput: missing fields {missing}")
        defaults = {"response_logprobs": None, "routed_experts": None, "multi_modal_data": None, "reward_score": None,
                    "num_turns": 0, "extra_fields": {}, "mm_processor_kwargs": None}
        for name in _OUTPUT_FIELDS:
            setattr(self, name, kwargs.get(name, defaults.get(name)))
        if isinstance(self.metrics, dict):
            self.metrics = AgentLoopMetrics(**self.metrics)
        if not isinstance(self.metrics, AgentLoopMetrics):
            raise ValueError("AgentLoopOutput.metrics: not an AgentLoopMetrics")
        for name in ("prompt_ids", "response_ids", "response_mask"):
            value = getattr(self, name)
            if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
                raise ValueError(f"AgentLoopOutput.{name}: a list of ints, got {value!r:.80}")
        del unknown  # pydantic ignores unknown fields too


class DictConfigWrap:
    def __init__(self, config):
        self.config = config


class ToolListWrap:
    def __init__(self, tools: list):
        self.tools = tools


class AgentLoopBase(ABC):
    def __init__(self, trainer_config: DictConfigWrap, server_manager, tokenizer, processor, dataset_cls, data_config: DictConfigWrap,
                 hf_model_type: Optional[str] = None, **kwargs):
        self.config = trainer_config.config
        self.rollout_config = self.config.actor_rollout_ref.rollout
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.dataset_cls = dataset_cls
        self.data_config = data_config.config
        self.apply_chat_template_kwargs = self.data_config.get("apply_chat_template_kwargs", {})
        self.continuous_token_builder = create_continuous_token_builder(
            self.tokenizer, hf_model_type=hf_model_type, chat_template_kwargs=self.apply_chat_template_kwargs, processor=processor)
        self.loop = asyncio.get_event_loop()

    async def ct_build_initial_tokens(self, messages, tools=None, images=None, videos=None, audios=None) -> List[int]:
        ids = await self.loop.run_in_executor(None, lambda: self.continuous_token_builder.build_initial_tokens(
            messages, tools=tools, images=images, videos=videos, audios=audios))
        return self._cap_text_prompt_length(ids)

    async def ct_merge_non_assistant_msg(self, previous_messages, updated_messages, runtime_token_ids, response_mask,
                                         response_logprobs=None, tools=None):
        result = await self.loop.run_in_executor(None, lambda: self.continuous_token_builder.merge_non_assistant_tokens(
            previous_messages, updated_messages, runtime_token_ids, tools=tools))
        mask, logprobs = self.continuous_token_builder.align_response_metadata(result, response_mask, response_logprobs)
        return result, mask, logprobs

    async def ct_merge_assistant_token(self, runtime_token_ids, assistant_token_ids, response_mask, response_logprobs=None,
                                       assistant_logprobs=None):
        result = await self.loop.run_in_executor(None, lambda: self.continuous_token_builder.merge_assistant_tokens(
            runtime_token_ids, assistant_token_ids))
        mask, logprobs = self.continuous_token_builder.align_response_metadata(
            result, response_mask, response_logprobs, assistant_logprobs=assistant_logprobs)
        return result, mask, logprobs

    def _cap_text_prompt_length(self, prompt_ids: List[int]) -> List[int]:
        limit = self.rollout_config.prompt_length
        return prompt_ids[-limit:] if len(prompt_ids) > limit else prompt_ids

    @abstractmethod
    async def run(self, sampling_params: Dict[str, Any], **kwargs) -> AgentLoopOutput:
        raise NotImplementedError


_agent_loop_registry: Dict[str, dict] = {}


def register(agent_name: str):
    def decorator(subclass):
        _agent_loop_registry[agent_name] = {"_target_": f"{subclass.__module__}.{subclass.__qualname__}"}
        return subclass

    return decorator


def _instantiate(config: dict, **kwargs):
    """hydra.utils.instantiate of a registry entry: the class its _target_ names."""
    module, _, name = config["_target_"].rpartition(".")
    return getattr(importlib.import_module(module), name)(**kwargs)


class AgentLoopWorker:
    """verl's worker, cut to what happens to an agent loop's output."""

    def __init__(self, config, server_manager, tokenizer, hf_model_type=None, agent_loop_configs: Optional[List[dict]] = None):
        self.config = config
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.hf_model_type = hf_model_type
        for entry in agent_loop_configs or []:  # what agent_loop_config_path lists
            _agent_loop_registry[entry["name"]] = entry

    async def generate_sequences(self, rows: List[Dict[str, Any]], validate: bool = False) -> Dict[str, Any]:
        rollout = self.config.actor_rollout_ref.rollout
        sampling_params = dict(temperature=rollout.temperature, top_p=1.0, top_k=-1, repetition_penalty=1.0,
                               logprobs=rollout.calculate_log_probs)
        default = rollout.agent.default_agent_loop
        tasks = [asyncio.create_task(self._run_agent_loop(sampling_params, agent_name=row.get("agent_name", default), **row))
                 for row in rows]
        outputs = await asyncio.gather(*tasks)
        return self._postprocess(outputs, rows)

    async def _run_agent_loop(self, sampling_params, *, agent_name: str, **kwargs) -> AgentLoopOutput:
        assert agent_name in _agent_loop_registry, f"Agent loop {agent_name} not registered"
        loop = _instantiate(_agent_loop_registry[agent_name], trainer_config=DictConfigWrap(self.config),
                            server_manager=self.server_manager, tokenizer=self.tokenizer, processor=None,
                            hf_model_type=self.hf_model_type, dataset_cls=None, data_config=DictConfigWrap(self.config.data),
                            tools=ToolListWrap([]))
        output = await loop.run(sampling_params, **kwargs)
        output.extra_fields["raw_prompt"] = kwargs["raw_prompt"]
        if output.reward_score is None:
            raise AssertionError("this stand-in has no reward loop: the agent loop must score")
        return output

    def _postprocess(self, outputs: List[AgentLoopOutput], rows) -> Dict[str, Any]:
        infos = [o.extra_fields.get("reward_extra_info", {}) for o in outputs]
        keys = list(infos[0].keys())
        non_tensor = {"__num_turns__": [o.num_turns for o in outputs], "data_source": [r.get("data_source") for r in rows]}
        for key in keys:
            non_tensor[key] = [info[key] for info in infos]  # a KeyError in verl too
        rm_scores = []
        for o in outputs:
            scores = [0.0] * len(o.response_mask)
            if scores:
                scores[-1] = o.reward_score
            rm_scores.append(scores)
        return {"outputs": outputs, "rm_scores": rm_scores, "non_tensor_batch": non_tensor,
                "meta_info": {"metrics": [o.metrics.model_dump() for o in outputs], "reward_extra_keys": keys}}


def timing_metrics(metrics: List[Dict[str, Any]]) -> Dict[str, float]:
    """AgentLoopManager._performance_metrics' agent_loop/<metric>/{min,max,mean}."""
    out = {}
    for name in ("generate_sequences", "tool_calls", "compute_score", "num_preempted"):
        values = [m[name] for m in metrics]
        out[f"agent_loop/{name}/min"] = min(values)
        out[f"agent_loop/{name}/max"] = max(values)
        out[f"agent_loop/{name}/mean"] = sum(values) / len(values)
    return out


def validation_metrics(batch: Dict[str, Any], n: int) -> Dict[str, float]:
    """RayPPOTrainer._validate's names for one sample per prompt group of n:
    `reward` and each reward_extra_info key, by data source, as
    val-core/<source>/reward/mean@<n> and val-aux/<source>/<key>/mean@<n>."""
    sources = batch["non_tensor_batch"]["data_source"]
    values = {"reward": [sum(s) for s in batch["rm_scores"]]}
    for key in batch["meta_info"]["reward_extra_keys"]:
        values[key] = batch["non_tensor_batch"][key]
    out = {}
    for source in sorted(set(sources)):
        for var, vals in values.items():
            picked = [v for v, s in zip(vals, sources) if s == source]
            section = "val-core" if var == "reward" else "val-aux"
            out[f"{section}/{source}/{var}/mean@{n}"] = sum(picked) / len(picked)
    return out
