"""Fixtures: a real `agentenv serve`, rows as `agentenv skyrl rows` writes
them, and the stand-ins' tokenizer and scripted inference engine.

Run from the repository root: `python3 -m pytest integrations/skyrl/tests`
(make test does, through cmd/agentenv/skyrl_pytest_test.go). AGENTENV_BIN
names the agentenv binary; without it the tests build one.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# The package under test and the one it builds on, the suites' shared
# helpers, then the stand-ins; a real skyrl-gym first when asked.
sys.path[:0] = [str(HERE.parent), str(HERE.parents[1] / "episode"), str(HERE.parents[1] / "episode" / "tests")]
if os.environ.get("AGENTENV_SKYRL_GYM_SRC"):
    sys.path.insert(0, os.environ["AGENTENV_SKYRL_GYM_SRC"])
sys.path.append(str(HERE / "standin"))

from agentenv_server import (  # noqa: E402,F401  (the tests import these from here)
    END, GRIDSIM, INBOX, REPO, TOKEN, TOKEN_VAR, CharTokenizer, Server, build_agentenv, call, free_port,
    gridsim_policy, messages_of, optimal_schedule,
)
from skyrl.train.generators.base import BatchMetadata, TrajectoryID  # noqa: E402

from agentenv_skyrl.train import register_env  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _registered():
    register_env()


@pytest.fixture(scope="session")
def agentenv_bin(tmp_path_factory) -> str:
    return build_agentenv(tmp_path_factory.mktemp("bin") / "agentenv")


@pytest.fixture(scope="module")
def gridsim(agentenv_bin):
    s = Server(agentenv_bin, GRIDSIM).start()
    yield s
    s.close()


# -- the stand-ins' model side ---------------------------------------------

class ScriptedEngine:
    """The inference engine: `policy(messages, trajectory_id)` writes each
    reply (sync or async) from the decoded context."""

    def __init__(self, policy):
        self.policy = policy

    async def generate(self, engine_input):
        text = CharTokenizer.decode(engine_input["prompt_token_ids"][0])
        reply = self.policy(messages_of(text)[:-1], engine_input.get("trajectory_id"))
        if inspect.isawaitable(reply):
            reply = await reply
        return {"responses": [reply], "response_ids": [[ord(c) for c in reply]], "stop_reasons": ["stop"]}


class Cfg:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def generator_cfg(max_turns=4, max_input_length=1 << 20, batched=False):
    return Cfg(max_turns=max_turns, batched=batched, max_input_length=max_input_length)


def make_generator(policy, max_turns=4, workers=64, **kw):
    from agentenv_skyrl.generator import AgentEnvGenerator

    return AgentEnvGenerator(
        generator_cfg=generator_cfg(max_turns=max_turns, **kw),
        skyrl_gym_cfg=Cfg(max_env_workers=workers),
        inference_engine_client=ScriptedEngine(policy),
        tokenizer=CharTokenizer(),
    )


def batch(rows, n_samples=1, phase="train"):
    """SkyRL's generator input for rows, n_samples rollouts each (a group)."""
    expanded = [(i, r, k) for i, r in enumerate(rows) for k in range(n_samples)]
    return {
        "prompts": [r["prompt"] for _, r, _ in expanded],
        "env_classes": [r["env_class"] for _, r, _ in expanded],
        "env_extras": [{k: v for k, v in r.items() if k not in ("prompt", "env_class")} for _, r, _ in expanded],
        "sampling_params": None,
        "trajectory_ids": [TrajectoryID(instance_id=str(i), repetition_id=k) for i, _, k in expanded],
        "batch_metadata": BatchMetadata(global_step=1, training_phase=phase),
    }


def generate(generator, input_batch):
    return asyncio.run(generator.generate(input_batch))


