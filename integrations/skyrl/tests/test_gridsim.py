"""The env and generator against a real `agentenv serve examples/gridsim`."""

import json
import logging
import socket
import threading

import pytest
import skyrl_gym
from conftest import (
    END, GRIDSIM, TOKEN, TOKEN_VAR, Server, batch, call, generate, gridsim_policy, make_generator,
)

from agentenv_skyrl import AgentEnvError
from agentenv_skyrl.env import AgentEnvTextEnv


def counts(metrics):
    """The metrics but the phase times."""
    return {k: v for k, v in metrics.items() if not k.startswith("time/")}


def times(metrics):
    return {k: v for k, v in metrics.items() if k.startswith("time/")}


def make_env(row, max_turns=4):
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    extras["max_turns"] = max_turns
    return skyrl_gym.make("agentenv", env_config={}, extras=extras)


def test_optimal_and_idle_reach_their_grades(gridsim):
    rows = gridsim.rows("eval", 3)

    def policy(messages, tid):
        # Rows 0 and 1 play optimally, row 2 idles.
        return gridsim_policy("idle" if tid.instance_id == "2" else "optimal")(messages, tid)

    out = generate(make_generator(policy), batch(rows))
    assert [sum(r) for r in out["rewards"]] == [1.0, 1.0, 0.2]
    # The reward sits on the last generated token, as SkyRL places it.
    for reward, mask in zip(out["rewards"], out["loss_masks"]):
        assert reward[-1] == sum(reward) and mask[-1] == 1
    m = out["rollout_metrics"]
    assert m["environment/avg_score/grade"] == pytest.approx(2.2 / 3)
    assert m["environment/avg_attempts"] == 1.0 and m["environment/avg_failed"] == 0.0
    assert m["environment/avg_tool_calls"] == pytest.approx(5 / 3)  # 2, 2, 1
    assert m["environment/avg_unparsed_calls"] == 0.0
    assert all(k.startswith("environment/avg_") for k in m if k.startswith("environment/"))
    assert counts(out["env_metrics"][2]) == {"attempts": 1, "failed": 0, "score/grade": 0.2, "tool_calls": 1.0, "unparsed_calls": 0.0}
    # The server's phase times, passed on: SkyRL logs environment/avg_time/<phase>.
    assert set(times(out["env_metrics"][2])) == {f"time/{p}" for p in ("queue", "deploy", "ready", "setup", "step", "tool", "verify")}
    assert m["environment/avg_time/deploy"] > 0 and m["environment/avg_time/step"] > 0
    assert m["environment/avg_time/tool"] <= m["environment/avg_time/step"]


def test_steps_return_tool_messages_and_the_reward_on_the_last(gridsim):
    row = gridsim.rows("eval", 1)[0]
    env = make_env(row)
    prompt, meta = env.init(row["prompt"])
    assert prompt == row["prompt"] and meta == {}
    first = env.step(call("get_prices", {}))
    assert first["done"] is False and first["reward"] == 0.0
    assert [m["role"] for m in first["observations"]] == ["tool"]
    day = json.loads(first["observations"][0]["content"])
    assert len(day["prices"]) == 24
    second = env.step(call("submit_schedule", {"schedule": [0] * 24}) + "\n" + '<tool_call>\n{"name": oops}\n</tool_call>')
    assert second["done"] is False
    last = env.step("Done." + END)
    assert last == {"observations": [], "reward": 0.2, "done": True, "metadata": {}, "postprocessed_action": None}
    # The good call of that reply ran, the broken block came back unparsed (docs/tool-formats.md).
    assert [m["role"] for m in second["observations"]] == ["tool", "tool"]
    assert counts(env.get_metrics()) == {"attempts": 1, "failed": 0, "score/grade": 0.2, "tool_calls": 2.0, "unparsed_calls": 1.0}
    env.close()


def test_max_turns_ends_the_episode(gridsim):
    rows = gridsim.rows("eval", 1)
    out = generate(make_generator(gridsim_policy("optimal"), max_turns=1), batch(rows))
    # One reply (get_prices), then the server ends and scores the episode: no schedule, grade 0.
    assert sum(out["rewards"][0]) == 0.0
    assert out["env_metrics"][0]["score/grade"] == 0.0 and out["env_metrics"][0]["failed"] == 0
    assert "".join(map(chr, out["response_ids"][0])) == call("get_prices", {})  # one reply; the last observation is dropped
    out = generate(make_generator(gridsim_policy("optimal"), max_turns=2), batch(rows))
    assert out["env_metrics"][0]["score/grade"] == 1.0  # submitted on reply 2, scored at the cap


def test_no_network_in_init_or_get_metrics(gridsim):
    # A listener that counts connections stands where the row's server is.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.settimeout(0.5)
        row = gridsim.rows("eval", 1)[0]
        row["server"] = dict(row["server"], url="http://127.0.0.1:%d" % listener.getsockname()[1])
        env = make_env(row)
        env.get_metrics()
        with pytest.raises(socket.timeout):
            listener.accept()


def test_a_failed_env_reports_failed_and_does_not_raise(gridsim):
    row = gridsim.rows("eval", 1)[0]
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    row["server"] = dict(row["server"], url=f"http://127.0.0.1:{dead}", reset_timeout=2, attempts=3)
    env = make_env(row)
    assert env.init(row["prompt"])[0] == row["prompt"]
    out = env.step(call("get_prices", {}))
    assert out["done"] is True and out["reward"] == 0.0 and out["observations"] == []
    assert env.get_metrics() == {"attempts": 1, "failed": 1}
    assert "reset_timeout" in env.failure
    # Through the generator: the first attempt used the whole reset_timeout, so no other starts.
    out = generate(make_generator(gridsim_policy("idle")), batch([row], n_samples=2))
    assert out["env_metrics"] == [{"attempts": 1, "failed": 1}] * 2
    assert out["loss_masks"][0] == [0] * len(out["loss_masks"][0])
    assert out["rollout_metrics"]["generate/num_masked_instances"] == 1


def test_a_tool_the_row_does_not_list_raises(gridsim):
    row = gridsim.rows("eval", 1)[0]
    row["episode"] = dict(row["episode"], tools=["submit_schedule"])
    with pytest.raises(AgentEnvError, match="offers get_prices, which its row does not list"):
        generate(make_generator(gridsim_policy("idle")), batch([row]))


def test_a_row_for_another_task_raises(gridsim):
    row = gridsim.rows("eval", 2)[1]
    row["episode"] = dict(row["episode"], task_id="day/eval-999")
    env = make_env(row)
    with pytest.raises(AgentEnvError, match="is task 'day/eval-002'.*write them again"):
        env.init(row["prompt"])
    row["episode"] = dict(row["episode"], task_id="day/eval-002", index=5000)
    with pytest.raises(AgentEnvError, match="VALIDATION_ERROR|NOT_FOUND"):
        make_env(row).init(row["prompt"])


def test_rows_missing_their_columns_are_refused():
    with pytest.raises(AgentEnvError, match="no 'episode' column"):
        AgentEnvTextEnv(env_config={}, extras={"max_turns": 4})
    with pytest.raises(AgentEnvError, match="server.attempts is 0, below 1"):
        AgentEnvTextEnv(extras={"episode": {"split": "eval", "index": 0, "task_id": "t", "tools": []},
                                "server": {"url": "http://h:1", "attempts": 0, "reset_timeout": 1, "tool_format": "hermes"}})
    with pytest.raises(AgentEnvError, match="carries credentials"):
        AgentEnvTextEnv(extras={"episode": {"split": "eval", "index": 0, "task_id": "t", "tools": []},
                                "server": {"url": "http://u:secret@h:1", "attempts": 1, "reset_timeout": 1, "tool_format": "hermes"}})


def test_generator_refuses_batched():
    with pytest.raises(ValueError, match="batched generation plays one turn without the env's steps"):
        make_generator(gridsim_policy("idle"), batched=True)


def test_the_token_is_used_and_never_written(agentenv_bin, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    server = Server(agentenv_bin, GRIDSIM, ["--token-var", TOKEN_VAR], env={TOKEN_VAR: TOKEN}).start()
    try:
        rows = server.rows("eval", 2, token_var=TOKEN_VAR)
        assert TOKEN not in json.dumps(rows)
        monkeypatch.setenv(TOKEN_VAR, TOKEN)
        out = generate(make_generator(gridsim_policy("idle")), batch(rows))
        assert [sum(r) for r in out["rewards"]] == [0.2, 0.2]

        # The wrong token: refused (no replay changes it), the message names the variable only.
        monkeypatch.setenv(TOKEN_VAR, "not-" + TOKEN)
        with pytest.raises(AgentEnvError) as wrong:
            generate(make_generator(gridsim_policy("idle")), batch(rows[:1]))
        assert "401" in str(wrong.value) and TOKEN not in str(wrong.value)
        # Unset: refused before anything is sent, naming the variable.
        monkeypatch.delenv(TOKEN_VAR)
        with pytest.raises(AgentEnvError, match=f"name \\${TOKEN_VAR} for the token"):
            generate(make_generator(gridsim_policy("idle")), batch(rows[:1]))
        # A failure's log line carries no token either.
        monkeypatch.setenv(TOKEN_VAR, TOKEN)
        server.stop()
        row = dict(rows[0], server=dict(rows[0]["server"], reset_timeout=1))
        out = generate(make_generator(gridsim_policy("idle")), batch([row]))
        assert out["env_metrics"][0]["failed"] == 1
        assert "agentenv env failed" in caplog.text
    finally:
        served = server.log()
        server.close()
    assert "serving:" in served and "token=true" in served
    assert TOKEN not in caplog.text and TOKEN not in served


def test_sessions_run_off_the_callers_threads(gridsim):
    # SkyRL calls init/step/close from whichever pool thread is free.
    row = gridsim.rows("eval", 1)[0]
    env = make_env(row)
    results = []
    for fn, arg in ((env.init, row["prompt"]), (env.step, call("submit_schedule", {"schedule": [0] * 24})), (env.step, "Done." + END)):
        t = threading.Thread(target=lambda: results.append(fn(arg)))
        t.start()
        t.join()
    assert results[-1]["done"] is True and results[-1]["reward"] == 0.2


def test_rollouts_wait_out_a_server_at_capacity(agentenv_bin):
    import asyncio

    server = Server(agentenv_bin, GRIDSIM, ["--max-concurrent-envs", "2"]).start()
    try:
        rows = server.rows("eval", 3)
        live, most = 0, 0
        both = asyncio.Event()  # set once two episodes were live at once

        async def policy(messages, tid):
            # The first episodes hold until two are live together, so the others'
            # resets queue at the server. An event, not a sleep: a loaded machine
            # once let one episode end before the next began (most == 1).
            nonlocal live, most
            replies = sum(1 for role, _ in messages if role == "assistant")
            if replies == 0:
                live += 1
                most = max(most, live)
                if live == 2:
                    both.set()
                await asyncio.wait_for(both.wait(), 120)  # a guard only
                return call("submit_schedule", {"schedule": [0] * 24})
            live -= 1
            return "Done." + END

        out = generate(make_generator(policy), batch(rows, n_samples=2))
    finally:
        server.close()
    assert [sum(r) for r in out["rewards"]] == [0.2] * 6
    assert out["rollout_metrics"]["environment/avg_attempts"] == 1.0
    assert most == 2  # never more episodes than the server's slots
