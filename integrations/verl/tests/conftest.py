"""Fixtures: a real `agentenv serve`, rows as `agentenv skyrl rows` writes
them, verl's agent loop worker (stand-in, tests/standin) and a scripted
policy behind verl's server manager.

Run from the repository root: `python3 -m pytest integrations/verl/tests`
(make test does, through cmd/agentenv/trainers_pytest_test.go).
AGENTENV_BIN names the agentenv binary; without it the tests build one.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parents[1] / "episode"), str(HERE.parents[1] / "episode" / "tests")]
sys.path.append(str(HERE / "standin"))

from agentenv_server import END, GRIDSIM, CharTokenizer, Server, build_agentenv, messages_of  # noqa: E402,F401
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from agentenv_verl import AGENT_LOOP_CONFIG  # noqa: E402


@pytest.fixture(scope="session")
def agentenv_bin(tmp_path_factory) -> str:
    return build_agentenv(tmp_path_factory.mktemp("bin") / "agentenv")


@pytest.fixture(scope="module")
def gridsim(agentenv_bin):
    s = Server(agentenv_bin, GRIDSIM).start()
    yield s
    s.close()


class Cfg(dict):
    """An OmegaConf DictConfig's two faces: attributes and get()."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def config(max_turns=4, response_length=1 << 16, prompt_length=1 << 16, chat_template_kwargs=None, logprobs=True):
    return Cfg(
        actor_rollout_ref=Cfg(rollout=Cfg(
            temperature=1.0, calculate_log_probs=logprobs, prompt_length=prompt_length, response_length=response_length,
            multi_turn=Cfg(max_assistant_turns=max_turns, max_user_turns=None),
            agent=Cfg(default_agent_loop="agentenv", agent_loop_config_path=AGENT_LOOP_CONFIG),
        )),
        data=Cfg(apply_chat_template_kwargs=chat_template_kwargs or {}),
    )


class VerlCharTokenizer(CharTokenizer):
    """The character tokenizer with the calls verl's helpers make."""

    def decode(self, ids, skip_special_tokens=False):
        return CharTokenizer.decode(ids)

    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]


class ScriptedServerManager:
    """verl's server manager: `policy(messages, request_id)` writes each
    reply from the decoded context (sync or async); every call is kept."""

    def __init__(self, policy, tokenizer=None):
        self.policy = policy
        self.tokenizer = tokenizer or VerlCharTokenizer()
        self.calls = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None, audio_data=None,
                       mm_processor_kwargs=None, **kwargs):
        self.calls.append({"request_id": request_id, "prompt_ids": list(prompt_ids), "sampling_params": sampling_params})
        text = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        reply = self.policy(messages_of(text)[:-1], request_id)
        if inspect.isawaitable(reply):
            reply = await reply
        ids = self.tokenizer.encode(reply, add_special_tokens=False)
        return TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="completed", num_preempted=0)


def load_registry_file():
    """The YAML entries of agentenv_verl/agent_loop.yaml, as verl reads them."""
    import yaml

    with open(AGENT_LOOP_CONFIG) as f:
        return yaml.safe_load(f)


def worker(policy, tokenizer=None, hf_model_type=None, **cfg):
    manager = ScriptedServerManager(policy, tokenizer)
    w = AgentLoopWorker(config(**cfg), manager, manager.tokenizer, hf_model_type=hf_model_type,
                        agent_loop_configs=load_registry_file())
    return w, manager


def verl_rows(rows, n=1):
    """What verl's RLHFDataset hands the worker for rows: every column, and
    raw_prompt from `prompt`; n rollouts of each."""
    return [dict(r, raw_prompt=r["prompt"], index=i) for i, r in enumerate(rows) for _ in range(n)]


def run(w, rows, validate=False):
    return asyncio.run(w.generate_sequences(rows, validate=validate))
