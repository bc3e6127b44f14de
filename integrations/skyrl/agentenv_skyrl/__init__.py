"""SkyRL's side of agentenv: the `agentenv` skyrl-gym env, AgentEnvGenerator and
`python -m agentenv_skyrl.train` (docs/training-skyrl.md).

Nothing here imports SkyRL or skyrl-gym until it is used, so the package
imports wherever it is installed.
"""

from agentenv_episode import ENV_ID, AgentEnvError

__version__ = "0.1.0"
__all__ = ["ENV_ID", "AgentEnvError", "AgentEnvTextEnv", "AgentEnvGenerator", "register_env"]


def __getattr__(name):
    if name == "AgentEnvTextEnv":
        from .env import AgentEnvTextEnv

        return AgentEnvTextEnv
    if name == "AgentEnvGenerator":
        from .generator import AgentEnvGenerator

        return AgentEnvGenerator
    if name == "register_env":
        from .train import register_env

        return register_env
    raise AttributeError(f"module 'agentenv_skyrl' has no attribute {name!r}")
