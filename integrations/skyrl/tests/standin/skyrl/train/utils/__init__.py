"""Stand-in for skyrl.train.utils.initialize_ray."""

import ray


def initialize_ray(cfg):
    ray.init()
