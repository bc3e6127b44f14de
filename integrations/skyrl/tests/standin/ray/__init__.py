"""Stand-in for Ray: a task runs as on another node would see it. Its
function and arguments are pickled (a function by reference, as Ray's
cloudpickle sends an importable module's), and the driver's AGENTENV*
variables are absent while it runs."""

import os
import pickle

INITIALIZED = []


def init(**kwargs):
    INITIALIZED.append(kwargs)


class _Task:
    def __init__(self, fn, options):
        self.fn, self.options = fn, options

    def remote(self, *args):
        fn, args = pickle.loads(pickle.dumps((self.fn, args)))
        saved = {k: v for k, v in os.environ.items() if k.startswith("AGENTENV")}
        for k in saved:
            del os.environ[k]
        try:
            return fn(*args)
        finally:
            for k in [k for k in os.environ if k.startswith("AGENTENV")]:
                del os.environ[k]
            os.environ.update(saved)


def remote(**options):
    return lambda fn: _Task(fn, options)


def get(ref):
    return ref
