"""Stand-in for skyrl-gym's package root (see ../README.md)."""

from skyrl_gym.core import Env
from skyrl_gym import error
from skyrl_gym.envs.registration import make, register, registry, spec

__all__ = ["Env", "error", "make", "register", "registry", "spec"]
