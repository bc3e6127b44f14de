"""Stand-in for skyrl_gym.core.Env: init/step/close, a context manager."""


class Env:
    def step(self, action):
        raise NotImplementedError

    def init(self, *args):
        raise NotImplementedError

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.close()
        return False
