"""Stand-in for skyrl-gym's registry: process-global, ids unique."""

import copy
import importlib
from dataclasses import dataclass, field
from typing import Any, Dict

from skyrl_gym import error
from skyrl_gym.core import Env


@dataclass
class EnvSpec:
    id: str
    entry_point: Any = None
    kwargs: Dict[str, Any] = field(default_factory=dict)


registry: Dict[str, EnvSpec] = {}


def load_env_creator(name: str):
    module, attr = name.split(":")
    return getattr(importlib.import_module(module), attr)


def register(id: str, entry_point=None, kwargs=None):
    assert entry_point is not None
    if id in registry:
        raise error.RegistrationError(f"An environment with name `{id}` is already registered")
    registry[id] = EnvSpec(id=id, entry_point=entry_point, kwargs=kwargs or {})


def deregister(id: str):
    if id not in registry:
        raise error.Error(f"No registered env with id: {id}")
    del registry[id]


def spec(id: str) -> EnvSpec:
    if id not in registry:
        raise error.Error(f"No registered env with id: {id}")
    return registry[id]


def make(id, **kwargs) -> Env:
    env_spec = spec(id) if isinstance(id, str) else id
    merged = copy.deepcopy(env_spec.kwargs)
    merged.update(kwargs)
    creator = env_spec.entry_point if callable(env_spec.entry_point) else load_env_creator(env_spec.entry_point)
    env = creator(**merged)
    if not isinstance(env, Env):
        raise TypeError(f"The environment must inherit from the skyrl_gym.Env class, actual class: {type(env)}. ")
    env.spec = env_spec
    return env
