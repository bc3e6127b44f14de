"""AgentEnvAgentLoop driven by verl's agent loop worker (stand-in) against a
real `agentenv serve examples/gridsim`."""

import json

import pytest
from agentenv_server import END, call, gridsim_policy
from conftest import VerlCharTokenizer, load_registry_file, run, verl_rows, worker
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry, timing_metrics, validation_metrics

from agentenv_verl import AGENT_NAME


def by_row(kind_of):
    """A policy per row: kind_of(index) is 'idle' or 'optimal'."""

    def policy(messages, request_id):
        user = next(c for r, c in messages if r == "user")
        return gridsim_policy(kind_of(user))(messages, request_id)

    return policy


def test_the_loop_is_registered_under_its_name_and_in_the_yaml():
    import agentenv_verl.agent_loop as module

    assert load_registry_file() == [{"name": "agentenv", "_target_": "agentenv_verl.agent_loop.AgentEnvAgentLoop"}]
    # @register put it there on import (the YAML entry, once a worker read it, names the same class).
    assert _agent_loop_registry[AGENT_NAME]["_target_"] == f"{module.__name__}.AgentEnvAgentLoop"


def test_idle_and_optimal_reach_their_grades(gridsim):
    rows = gridsim.rows("eval", 3)
    idle_prompt = rows[2]["prompt"][-1]["content"]
    w, manager = worker(by_row(lambda user: "idle" if user == idle_prompt else "optimal"))
    out = run(w, verl_rows(rows), validate=True)
    outputs = out["outputs"]
    assert [o.reward_score for o in outputs] == [1.0, 1.0, 0.2]
    # verl puts the reward on the last response token.
    assert [s[-1] for s in out["rm_scores"]] == [1.0, 1.0, 0.2]
    tok = VerlCharTokenizer()
    for o in outputs:
        # The prompt is the row's as verl's template helper renders it (tools in its system message).
        assert o.response_mask[-1] == 1
        # Mask 1 on the model's tokens only: they decode to the replies, the rest to tool messages.
        model = tok.decode([t for t, m in zip(o.response_ids, o.response_mask) if m])
        env = tok.decode([t for t, m in zip(o.response_ids, o.response_mask) if not m])
        assert model.count(END) == o.num_turns // 2 and "<|im_start|>tool\n" in env and "<tool_call>" not in env
        assert o.response_logprobs == [(-0.25 if m else 0.0) for m in o.response_mask]
    # optimal: get_prices, submit, done = 3 replies and 2 tool rounds; idle: 2 and 1.
    assert [o.num_turns for o in outputs] == [6, 6, 4]
    info = out["non_tensor_batch"]
    assert info["score/grade"] == [1.0, 1.0, 0.2] and info["attempts"] == [1.0] * 3 and info["failed"] == [0.0] * 3
    assert info["tool_calls"] == [2.0, 2.0, 1.0] and info["unparsed_calls"] == [0.0] * 3 and info["truncated"] == [0.0] * 3
    assert all(t > 0 for t in info["time/deploy"]) and all(t > 0 for t in info["time/step"])
    assert info["__num_turns__"] == [6, 6, 4]
    # Under verl's names: the validation metrics and the agent loop timings.
    val = validation_metrics(out, n=1)
    assert val["val-core/gridsim/reward/mean@1"] == pytest.approx(2.2 / 3)
    assert val["val-aux/gridsim/score/grade/mean@1"] == pytest.approx(2.2 / 3)
    assert val["val-aux/gridsim/failed/mean@1"] == 0.0 and val["val-aux/gridsim/tool_calls/mean@1"] == pytest.approx(5 / 3)
    timing = timing_metrics(out["meta_info"]["metrics"])
    assert timing["agent_loop/tool_calls/min"] > 0 and timing["agent_loop/generate_sequences/max"] >= 0
    assert timing["agent_loop/num_preempted/max"] == 0
    # One sticky request id per rollout, and verl's sampling params as given.
    ids = [c["request_id"] for c in manager.calls]
    assert len(set(ids)) == 3 and all(c["sampling_params"]["logprobs"] for c in manager.calls)


def test_first_prompt_is_the_rows_prompt_rendered_with_a_generation_prompt(gridsim):
    rows = gridsim.rows("eval", 1)
    w, manager = worker(gridsim_policy("idle"))
    out = run(w, verl_rows(rows))
    tok = VerlCharTokenizer()
    expected = tok.apply_chat_template(rows[0]["prompt"], add_generation_prompt=True, tokenize=True)
    assert manager.calls[0]["prompt_ids"] == expected
    assert out["outputs"][0].prompt_ids == expected


def test_max_turns_and_unparsed_calls(gridsim):
    rows = gridsim.rows("eval", 1)

    def policy(messages, _):
        replies = sum(1 for r, _ in messages if r == "assistant")
        if replies == 0:
            return call("submit_schedule", {"schedule": [0] * 24}) + '\n<tool_call>\n{"name": oops}\n</tool_call>' + END
        return call("get_prices", {})

    w, _ = worker(policy, max_turns=2)
    out = run(w, verl_rows(rows))
    o = out["outputs"][0]
    # The server ends and scores the episode at max_turns (2 replies).
    assert o.reward_score == 0.2 and o.num_turns == 4
    info = out["non_tensor_batch"]
    assert info["unparsed_calls"] == [1.0] and info["tool_calls"] == [2.0]


def test_a_long_response_is_truncated_and_scores_0(gridsim):
    rows = gridsim.rows("eval", 1)
    w, _ = worker(gridsim_policy("optimal"), response_length=200)
    o = run(w, verl_rows(rows))["outputs"][0]
    assert len(o.response_ids) == len(o.response_mask) == 200
    assert o.reward_score == 0.0
    assert json.dumps(run(w, verl_rows(rows))["non_tensor_batch"]["truncated"]) == "[1.0]"
