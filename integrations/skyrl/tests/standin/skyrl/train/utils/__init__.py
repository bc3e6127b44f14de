"""Stand-in for skyrl.train.utils: initialize_ray and validate_cfg."""

import ray


def initialize_ray(cfg):
    ray.init()


def validate_cfg(cfg):
    if cfg.generator.max_turns < 1:
        raise ValueError("generator.max_turns must be at least 1")
