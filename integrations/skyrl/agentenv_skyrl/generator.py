"""AgentEnvGenerator: SkyRL's generator, with the env's failed rollouts
played again and, when every attempt failed, their groups left out.

SkyRL cannot leave one rollout out of a step and stops the step on an env's
error, so a rollout the env failed (it reports `failed`) is played again from
the start on a new episode, up to the row's `attempts`, none starting once the
row's `reset_timeout` has passed since the rollout began. One that failed
every attempt leaves its whole group out of training, as SkyRL's Harbor
integration does with a failed trial: the group's loss masks and rewards are
zeroed, so it is out of the gradient and of its baseline. In an eval the
failed rollout scores 0.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Dict, List, Optional

from agentenv_episode import ENV_ID, Replays, Row
from skyrl.train.generators.skyrl_gym_generator import SkyRLGymGenerator

from .extras import ROLLOUT_KEY

log = logging.getLogger("agentenv_skyrl")

BATCHED_REFUSAL = (
    "generator.batched=true: SkyRL's batched generation plays one turn without the env's steps, "
    "so the agentenv env would never run a tool call; set generator.batched=false"
)


class AgentEnvGeneration:
    """The replay and masking, mixed into a SkyRL generator class."""

    def __init__(self, *args, **kwargs):
        cfg = kwargs.get("generator_cfg", args[0] if args else None)
        if getattr(cfg, "batched", False):
            raise ValueError(BATCHED_REFUSAL)
        super().__init__(*args, **kwargs)

    async def agent_loop(self, prompt, env_class, env_extras, *args, **kwargs):
        if env_class != ENV_ID:
            return await super().agent_loop(prompt, env_class, env_extras, *args, **kwargs)
        row = Row.from_extras(env_extras)
        trajectory_id = kwargs.get("trajectory_id")
        label = trajectory_id.to_string() if trajectory_id is not None else ""
        replays = Replays(row)
        splits: Optional[Dict[str, float]] = {}
        while True:
            attempt = replays.next()
            extras = copy.deepcopy(env_extras)
            extras[ROLLOUT_KEY] = {"deadline": replays.deadline, "attempt": attempt, "trajectory": label}
            output = await super().agent_loop(copy.deepcopy(prompt), env_class, extras, *args, **kwargs)
            splits = _add_splits(splits, getattr(output, "time_splits", None))
            failed = bool(_final_metrics(output).get("failed"))
            if not replays.again(failed):
                break
        metrics = _final_metrics(output)
        metrics["attempts"] = attempt
        metrics["failed"] = 1 if failed else 0
        if failed:
            # The group's one warning is mask_failed's.
            log.debug("agentenv: %s failed on all %d attempts", row.where(), attempt)
        # The whole rollout's time, every attempt's included.
        output.e2e_time = replays.elapsed()
        if splits is not None and getattr(output, "time_splits", None) is not None:
            output.time_splits = splits
        return output

    async def generate(self, input_batch, disable_tqdm: bool = False):
        output = await super().generate(input_batch, disable_tqdm=disable_tqdm)
        mask_failed(output, input_batch)
        return output


def mask_failed(output: Dict[str, Any], input_batch: Dict[str, Any]) -> int:
    """Leaves out of training every group holding a rollout that failed every
    attempt (loss masks and rewards zeroed), with one warning per group, and
    computes the token metrics over the rollouts trained on; in an eval,
    scores such a rollout 0. Returns the number of groups left out."""
    env_metrics = output.get("env_metrics")
    if not env_metrics:
        return 0
    classes = input_batch.get("env_classes") or []
    ours = (lambda i: classes[i] == ENV_ID) if len(classes) == len(env_metrics) else (lambda i: True)
    failed = [i for i, m in enumerate(env_metrics) if m and m.get("failed") and ours(i)]
    if not failed:
        return 0
    metadata = input_batch.get("batch_metadata")
    groups = _groups(output, input_batch)
    eval_phase = getattr(metadata, "training_phase", "train") == "eval"
    by_group: Dict[Any, List[int]] = {}
    for i in failed:
        by_group.setdefault(groups[i], []).append(i)
    for group, rows in by_group.items():
        log.warning("agentenv: %s of group %s failed on every attempt (%s); %s", _count(len(rows), "rollout"), group,
                    _where(input_batch, rows), "scored 0 in this eval" if eval_phase else "the group is left out of training")
    if eval_phase:
        for i in failed:
            output["rewards"][i] = _zeros(output["rewards"][i])
        return 0
    left_out = set(by_group)
    for i, group in enumerate(groups):
        if group in left_out:
            output["loss_masks"][i] = [0] * len(output["loss_masks"][i])
            output["rewards"][i] = _zeros(output["rewards"][i])
    metrics = output.get("rollout_metrics")
    if metrics is not None:
        # SkyRL computed the token metrics before the masking: compute them
        # again over what is trained, as Harbor's generator does.
        set_trained_metrics(metrics, output, [i for i, g in enumerate(groups) if g not in left_out])
        # Named as Harbor names it; summed where SkyRL joins groups' metrics.
        metrics["generate/num_masked_instances"] = len(left_out)
    return len(left_out)


def set_trained_metrics(metrics: Dict[str, Any], output: Dict[str, Any], kept: List[int]) -> None:
    """Sets in `metrics` SkyRL's token and reward metrics (generate/*_num_tokens,
    *_assistant_tokens, tokens_per_turn_*, avg_tokens_(non_)zero_rewards)
    computed over the rows `kept` of `output` only; with none kept, drops them."""
    from skyrl.train.generators.utils import get_rollout_metrics

    # The keys get_rollout_metrics derives from responses, rewards and masks.
    stale = [k for k in metrics if k.startswith("generate/") and "tokens" in k]
    for k in stale:
        del metrics[k]
    if not kept:
        return
    fresh = get_rollout_metrics(
        [output["response_ids"][i] for i in kept],
        [output["rewards"][i] for i in kept],
        loss_masks=[output["loss_masks"][i] for i in kept],
    )
    metrics.update({k: v for k, v in fresh.items() if k.startswith("generate/") and "tokens" in k})


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _where(input_batch: Dict[str, Any], rows: List[int]) -> str:
    extras = input_batch.get("env_extras") or []
    seen: List[str] = []
    for i in rows:
        try:
            w = Row.from_extras(extras[i]).where()
        except Exception:  # a row we cannot read is named by its place
            w = f"row {i}"
        if w not in seen:
            seen.append(w)
    return ", ".join(seen)


def _groups(output: Dict[str, Any], input_batch: Dict[str, Any]) -> List[Any]:
    """The group (prompt instance) of each output row: step-wise outputs name
    their rows' trajectories, others keep the input's order."""
    ids = output.get("trajectory_ids") or input_batch.get("trajectory_ids")
    rows = len(output["loss_masks"])
    if not ids or len(ids) != rows:
        return list(range(rows))  # no ids: each rollout is its own group
    return [t.instance_id for t in ids]


def _zeros(reward):
    return [0.0] * len(reward) if isinstance(reward, list) else 0.0


def _final_metrics(output) -> Dict[str, Any]:
    """The env metrics of a rollout's output (its last step's when step-wise)."""
    steps = getattr(output, "step_outputs", None)
    target = steps[-1] if steps else output
    if getattr(target, "env_metrics", None) is None:
        target.env_metrics = {}
    return target.env_metrics


def _add_splits(total: Optional[Dict[str, float]], split: Optional[Dict[str, float]]) -> Optional[Dict[str, float]]:
    if total is None or split is None:
        return None
    for name, seconds in split.items():
        total[name] = total.get(name, 0.0) + seconds
    return total


class AgentEnvGenerator(AgentEnvGeneration, SkyRLGymGenerator):
    """SkyRLGymGenerator with the env's failed rollouts replayed or left out."""


def generator_class(vision_language: bool = False) -> type:
    """AgentEnvGenerator, or its vision-language twin for
    generator.vision_language_generator=true."""
    if not vision_language:
        return AgentEnvGenerator
    from skyrl.train.generators.skyrl_vlm_generator import SkyRLVLMGymGenerator

    return type("AgentEnvVLMGenerator", (AgentEnvGeneration, SkyRLVLMGymGenerator), {"__doc__": AgentEnvGenerator.__doc__})
