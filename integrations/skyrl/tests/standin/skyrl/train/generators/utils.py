"""Stand-in for the rollout metrics of skyrl.train.generators.utils: the
token and reward statistics get_rollout_metrics derives from responses,
rewards and loss masks (same keys, same definitions), and the join of
several groups' outputs, which computes them again over every row."""

from statistics import mean, pstdev

from skyrl_gym.metrics import aggregate_for_environment


def _turns(loss_masks):
    """Run lengths of consecutive 1s in each mask: one run per turn."""
    runs = []
    for mask in loss_masks:
        n = 0
        for m in list(mask) + [0]:
            if m:
                n += 1
            elif n:
                runs.append(n)
                n = 0
    return runs


def get_rollout_metrics(responses, rewards, env_metrics=None, env_classes=None, loss_masks=None,
                        trajectory_completion_times=None, trajectory_time_splits=None):
    flat = [sum(r) if isinstance(r, list) else float(r) for r in rewards]
    tokens = [len(r) for r in responses]
    nonzero = [t for t, r in zip(tokens, flat) if r > 0.0]
    zero = [t for t, r in zip(tokens, flat) if r == 0.0]
    metrics = {
        "generate/min_num_tokens": min(tokens),
        "generate/max_num_tokens": max(tokens),
        "generate/avg_num_tokens": mean(tokens),
        "generate/std_num_tokens": pstdev(tokens),
        "generate/avg_tokens_non_zero_rewards": mean(nonzero) if nonzero else 0.0,
        "generate/avg_tokens_zero_rewards": mean(zero) if zero else 0.0,
        "generate/avg_raw_reward_standin": sum(flat) / len(flat),
    }
    if loss_masks is not None:
        assistant = [sum(m) for m in loss_masks]
        metrics.update({"generate/avg_assistant_tokens": mean(assistant), "generate/min_assistant_tokens": min(assistant),
                        "generate/max_assistant_tokens": max(assistant), "generate/std_assistant_tokens": pstdev(assistant)})
        turns = _turns(loss_masks)
        if turns:
            metrics.update({"generate/tokens_per_turn_mean": mean(turns), "generate/tokens_per_turn_std": pstdev(turns),
                            "generate/tokens_per_turn_max": max(turns)})
    for name, times in (trajectory_time_splits or {}).items():
        metrics[f"generate/trajectory_time_{name}_mean"] = sum(times) / len(times)
    if env_metrics is not None and env_classes is not None:
        by_env = {}
        for m, env in zip(env_metrics, env_classes):
            by_env.setdefault(env, []).append(m)
        for env, ms in by_env.items():
            for key, value in aggregate_for_environment(env, ms).items():
                metrics[f"environment/{key}"] = value
    return metrics


def concatenate_generator_outputs(outputs, step_wise=False):
    """The join of the fully async trainer: rows concatenated, the token
    metrics computed again over all of them, the groups' other numeric
    metrics kept by name (avg/mean averaged, min, max, else summed)."""
    result = {key: [x for o in outputs for x in o[key]] for key in ("prompt_token_ids", "response_ids", "rewards", "loss_masks")}
    metrics = get_rollout_metrics(result["response_ids"], result["rewards"], loss_masks=result["loss_masks"])
    extra = {}
    for o in outputs:
        for k, v in (o.get("rollout_metrics") or {}).items():
            if k not in metrics and isinstance(v, (int, float)):
                extra.setdefault(k, []).append(v)
    for k, vs in extra.items():
        if "avg" in k or "mean" in k:
            metrics[k] = sum(vs) / len(vs)
        elif "min" in k:
            metrics[k] = min(vs)
        elif "max" in k:
            metrics[k] = max(vs)
        else:
            metrics[k] = sum(vs)
    result["rollout_metrics"] = metrics
    return result
