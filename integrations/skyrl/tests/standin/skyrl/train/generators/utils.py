"""Stand-in for the rollout metrics of skyrl.train.generators.utils."""

from skyrl_gym.metrics import aggregate_for_environment


def get_rollout_metrics(responses, rewards, env_metrics=None, env_classes=None, loss_masks=None,
                        trajectory_completion_times=None, trajectory_time_splits=None):
    flat = [sum(r) if isinstance(r, list) else float(r) for r in rewards]
    metrics = {"generate/avg_num_tokens": sum(len(r) for r in responses) / len(responses),
               "generate/avg_raw_reward_standin": sum(flat) / len(flat)}
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
