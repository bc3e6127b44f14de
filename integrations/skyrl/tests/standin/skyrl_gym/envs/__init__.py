from skyrl_gym.envs.registration import deregister, register

__all__ = ["deregister", "register"]
