"""Fixtures: a real `agentenv serve`, rows as `agentenv skyrl rows` writes
them, TRL's GRPOTrainer (stand-in, tests/standin) with a scripted policy
generating.

Run from the repository root: `python3 -m pytest integrations/trl/tests`
(make test does, through cmd/agentenv/trainers_pytest_test.go).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parents[1] / "episode"), str(HERE.parents[1] / "episode" / "tests")]
sys.path.append(str(HERE / "standin"))

from agentenv_server import GRIDSIM, CharTokenizer, Server, build_agentenv, messages_of  # noqa: E402
from trl.trainer.grpo_trainer import GRPOTrainer  # noqa: E402

from agentenv_trl import AgentEnvRollouts  # noqa: E402


@pytest.fixture(scope="session")
def agentenv_bin(tmp_path_factory) -> str:
    return build_agentenv(tmp_path_factory.mktemp("bin") / "agentenv")


@pytest.fixture(scope="module")
def gridsim(agentenv_bin):
    s = Server(agentenv_bin, GRIDSIM).start()
    yield s
    s.close()


class TrlCharTokenizer(CharTokenizer):
    def decode(self, ids, skip_special_tokens=False):
        return CharTokenizer.decode(ids)

    def encode(self, text):
        return [ord(c) for c in text]


class Args:
    def __init__(self, **kw):
        self.num_generations = 1
        self.max_completion_length = None
        self.chat_template_kwargs = {}
        self.__dict__.update(kw)


class Policy:
    """generate(trainer, contexts) from `policy(messages, index)`; counts calls."""

    def __init__(self, policy, tokenizer=None):
        self.policy, self.tokenizer, self.calls = policy, tokenizer or TrlCharTokenizer(), []

    def __call__(self, trainer, contexts):
        self.calls.append([list(c) for c in contexts])
        out = []
        for i, ids in enumerate(contexts):
            reply = self.policy(messages_of(self.tokenizer.decode(ids))[:-1], i)
            out.append(self.tokenizer.encode(reply))
        return out, [[-0.5] * len(c) for c in out]


def trainer(rows, policy, num_generations=1, tokenizer=None, chat_template_kwargs=None, **kw):
    tokenizer = tokenizer or TrlCharTokenizer()
    rollouts = AgentEnvRollouts(rows, generate=Policy(policy, tokenizer), **kw)
    args = Args(num_generations=num_generations, chat_template_kwargs=chat_template_kwargs or {})
    t = GRPOTrainer(model="m", reward_funcs=[rollouts.reward_func], args=args, processing_class=tokenizer, rollout_func=rollouts)
    return t, rollouts


def inputs(rows, n=1):
    """TRL's inputs: every column of each row, each row n times (its group)."""
    return [dict(r) for r in rows for _ in range(n)]
