"""AgentEnvRollouts driven by GRPOTrainer's rollout_func path (stand-in)
against a real `agentenv serve examples/gridsim`."""

import math
import threading
import time
import urllib.request
import socket

import pytest
from agentenv_server import END, GRIDSIM, Server, call, gridsim_policy
from conftest import TrlCharTokenizer, inputs, trainer

from agentenv_episode import AgentEnvError


def by_prompt(idle_prompt):
    def policy(messages, _):
        user = next(c for r, c in messages if r == "user")
        return gridsim_policy("idle" if user == idle_prompt else "optimal")(messages, None)

    return policy


def test_idle_and_optimal_reach_their_grades(gridsim):
    rows = gridsim.rows("eval", 3)
    t, rollouts = trainer(rows, by_prompt(rows[2]["prompt"][-1]["content"]))
    out = t._generate_and_score_completions(inputs(rows))
    assert out["rewards"] == [1.0, 1.0, 0.2]
    tok = TrlCharTokenizer()
    for prompt_ids, row in zip(out["prompt_ids"], rows):
        # TRL's prompt: the row's prompt rendered with a generation prompt.
        assert prompt_ids == tok.apply_chat_template(row["prompt"], add_generation_prompt=True)
    for ids, mask, lps in zip(out["completion_ids"], out["loss_mask"], out["logprobs"]):
        model = tok.decode([t for t, m in zip(ids, mask) if m])
        env = tok.decode([t for t, m in zip(ids, mask) if not m])
        assert model.endswith(END) and "<tool_call>" in model and "<|im_start|>tool\n" in env and "<tool_call>" not in env
        assert lps == [(-0.5 if m else 0.0) for m in mask]
    m = t._metrics["train"]
    # Under TRL's names: the reward function's, and the metrics through log_metric.
    assert m["rewards/agentenv/mean"] == [pytest.approx(2.2 / 3)]
    assert m["agentenv/score/grade"] == [pytest.approx(2.2 / 3)]
    assert m["agentenv/attempts"] == [1.0] and m["agentenv/failed"] == [0.0] and m["agentenv/truncated"] == [0.0]
    assert m["agentenv/tool_calls"] == [pytest.approx(5 / 3)] and m["agentenv/unparsed_calls"] == [0.0]
    assert m["agentenv/time/deploy"][0] > 0 and m["agentenv/time/step"][0] > 0
    # One generate call per turn for every rollout still playing: 3, 3, then the two optimal ones.
    assert [len(c) for c in rollouts.generate.calls] == [3, 3, 2]


def test_a_group_of_generations(gridsim):
    rows = gridsim.rows("eval", 2)
    t, _ = trainer(rows, gridsim_policy("idle"), num_generations=4)
    out = t._generate_and_score_completions(inputs(rows, 4))
    assert out["rewards"] == [0.2] * 8 and out["advantages"] == [0.0] * 8


def test_a_prompt_not_in_the_rows_is_refused(gridsim):
    rows = gridsim.rows("eval", 2)
    t, _ = trainer(rows[:1], gridsim_policy("idle"))
    with pytest.raises(AgentEnvError, match="in none of the rows"):
        t._generate_and_score_completions(inputs(rows[1:]))


def test_rows_sharing_a_prompt_are_refused(gridsim):
    rows = gridsim.rows("eval", 2)
    rows[1] = dict(rows[1], prompt=rows[0]["prompt"])
    with pytest.raises(AgentEnvError, match="have the same prompt"):
        trainer(rows, gridsim_policy("idle"))


def test_an_unreachable_server_is_masked_and_unscored(gridsim):
    rows = gridsim.rows("eval", 2, attempts=3, reset_timeout=2)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        rows[0] = dict(rows[0], server=dict(rows[0]["server"], url=f"http://127.0.0.1:{s.getsockname()[1]}"))
    t, _ = trainer(rows, gridsim_policy("idle"), num_generations=2)
    out = t._generate_and_score_completions(inputs(rows[:1], 2) + inputs(rows[1:], 2))
    assert all(math.isnan(r) for r in out["rewards"][:2]) and out["rewards"][2:] == [0.2, 0.2]
    assert out["advantages"][:2] == [0.0, 0.0] and out["loss_mask"][:2] == [[], []]
    assert t._metrics["train"]["agentenv/failed"] == [0.5]


RESTART_AFTER = 3.0


@pytest.mark.parametrize("attempts", [3, 1])
def test_server_restart_mid_episode(agentenv_bin, attempts):
    """`agentenv serve` stopped (SIGTERM) while every rollout is mid-episode,
    started again RESTART_AFTER seconds later: replayed, or masked."""
    server = Server(agentenv_bin, GRIDSIM).start()
    stopped = []
    try:
        rows = server.rows("train", 2, attempts=attempts, reset_timeout=120)

        def policy(messages, _):
            replies = sum(1 for r, _ in messages if r == "assistant")
            if replies == 0:
                return call("get_prices", {})
            if replies == 1:
                if not stopped:  # every rollout is mid-episode now: all of a turn's replies are asked at once
                    server.stop()
                    stopped.append(True)
                    threading.Thread(target=lambda: (time.sleep(RESTART_AFTER), server.start())).start()
                return call("submit_schedule", {"schedule": [0] * 24})
            return "Done." + END

        t, _ = trainer(rows, policy, num_generations=4)
        out = t._generate_and_score_completions(inputs(rows, 4))
        m = t._metrics["train"]
        if attempts == 3:
            assert out["rewards"] == [0.2] * 8 and m["agentenv/attempts"] == [2.0] and m["agentenv/failed"] == [0.0]
            assert all(any(mask) for mask in out["loss_mask"])
        else:
            assert all(math.isnan(r) for r in out["rewards"]) and m["agentenv/failed"] == [1.0]
            assert all(not any(mask) for mask in out["loss_mask"]) and out["advantages"] == [0.0] * 8
        # The step after, once the server is back: as before.
        t2, _ = trainer(rows, gridsim_policy("idle"), num_generations=4)
        _wait_healthy(server)
        assert t2._generate_and_score_completions(inputs(rows, 4))["rewards"] == [0.2] * 8
    finally:
        server.close()


def _wait_healthy(server, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(server.url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)  # a poll interval
    raise AssertionError("the server did not come back")
