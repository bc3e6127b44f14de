"""Which skyrl-gym the suite runs against: the stand-in, or with
AGENTENV_SKYRL_GYM_SRC the real package's source (its skyrl-gym folder)."""

import os
from pathlib import Path

import skyrl_gym
from conftest import HERE


def test_which_skyrl_gym():
    src = os.environ.get("AGENTENV_SKYRL_GYM_SRC")
    expected = Path(src) if src else HERE / "standin"
    assert Path(skyrl_gym.__file__).resolve().is_relative_to(expected.resolve()), skyrl_gym.__file__
    # The env is a skyrl-gym Env of whichever package that is, registered as agentenv.
    from agentenv_skyrl.env import AgentEnvTextEnv

    assert issubclass(AgentEnvTextEnv, skyrl_gym.Env)
    assert skyrl_gym.registry["agentenv"].entry_point == "agentenv_skyrl.env:AgentEnvTextEnv"
