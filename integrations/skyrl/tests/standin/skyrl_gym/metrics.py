"""Stand-in for skyrl_gym.metrics: the class's aggregate_metrics per env id."""

from skyrl_gym.envs.registration import load_env_creator, registry


def default_aggregate_metrics(metrics):
    sums = {}
    for m in metrics:
        for k, v in m.items():
            if isinstance(v, (bool, int, float)):
                sums.setdefault(k, []).append(float(v))
    return {k: sum(v) / len(v) for k, v in sums.items()}


def aggregate_for_environment(env_name, metrics):
    env_spec = registry.get(env_name)
    if env_spec is None:
        raise ValueError(f"No registered env with id: {env_name}")
    ep = env_spec.entry_point
    cls = ep if callable(ep) else load_env_creator(ep)
    return cls.aggregate_metrics(metrics)
