"""Failed rollouts against a real server: `agentenv serve` is stopped
(SIGTERM) while every rollout of a step is mid-episode, and started again on
the same address RESTART_AFTER seconds later (docs/training-verl.md)."""

import asyncio
import socket

import pytest
from agentenv_server import END, GRIDSIM, Server, call
from conftest import run, verl_rows, worker

RESTART_AFTER = 3.0  # seconds between the server's exit and its start
ROWS, SAMPLES = 2, 4


def restart_scenario(server, rows):
    async def scenario():
        gate, everyone = asyncio.Event(), asyncio.Event()
        waiting = 0
        submitted = []

        async def policy(messages, request_id):
            nonlocal waiting
            replies = sum(1 for r, _ in messages if r == "assistant")
            if replies == 0:
                return call("get_prices", {})
            if replies == 1:
                if not gate.is_set():  # the first attempt: the episode is live on the server
                    waiting += 1
                    if waiting == ROWS * SAMPLES:
                        everyone.set()
                    await gate.wait()
                submitted.append(request_id)
                return call("submit_schedule", {"schedule": [0] * 24})
            return "Done." + END

        w, _ = worker(policy)

        async def restart():
            await everyone.wait()
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, server.stop)
            gate.set()
            await asyncio.sleep(RESTART_AFTER)  # the downtime under test, not a wait for an event
            await loop.run_in_executor(None, server.start)

        out, _ = await asyncio.gather(w.generate_sequences(verl_rows(rows, SAMPLES)), restart())
        played = list(submitted)
        after = await w.generate_sequences(verl_rows(rows, SAMPLES))
        return out, played, after

    return asyncio.run(scenario())


@pytest.mark.parametrize("attempts", [3, 1])
def test_server_restart_mid_episode(agentenv_bin, attempts):
    server = Server(agentenv_bin, GRIDSIM).start()
    try:
        rows = server.rows("train", ROWS, attempts=attempts, reset_timeout=120)
        out, submitted, after = restart_scenario(server, rows)
    finally:
        server.close()
    n = ROWS * SAMPLES
    info = out["non_tensor_batch"]
    if attempts == 3:
        # Played again once the server was back, and scored.
        assert info["attempts"] == [2.0] * n and info["failed"] == [0.0] * n
        assert [o.reward_score for o in out["outputs"]] == [0.2] * n
        assert all(any(o.response_mask) for o in out["outputs"])
        assert len(submitted) == 2 * n
    else:
        # Failed on its one attempt: no mask, reward 0, and said in its metrics.
        assert info["attempts"] == [1.0] * n and info["failed"] == [1.0] * n
        assert all(not any(o.response_mask) for o in out["outputs"])
        assert [o.reward_score for o in out["outputs"]] == [0.0] * n
        assert len(submitted) == n
    # Every rollout reports the same keys, a failed one's score 0 (verl reads the first's keys from all).
    assert "score/grade" in out["meta_info"]["reward_extra_keys"]
    # The step after: as before.
    assert after["non_tensor_batch"]["attempts"] == [1.0] * n and after["non_tensor_batch"]["failed"] == [0.0] * n
    assert [o.reward_score for o in after["outputs"]] == [0.2] * n


def test_an_unreachable_server_masks_after_reset_timeout(gridsim):
    row = gridsim.rows("eval", 1, attempts=3, reset_timeout=2)[0]
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        row["server"] = dict(row["server"], url=f"http://127.0.0.1:{s.getsockname()[1]}")
    w, manager = worker(lambda m, r: "never asked")
    out = run(w, verl_rows([row]))
    o = out["outputs"][0]
    assert o.response_mask == [] and o.reward_score == 0.0 and manager.calls == []
    # The first attempt used the whole reset_timeout, so no other started.
    assert out["non_tensor_batch"]["failed"] == [1.0] and out["non_tensor_batch"]["attempts"] == [1.0]
