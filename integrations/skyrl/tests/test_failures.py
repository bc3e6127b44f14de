"""The SkyRL page's failure table against a real server: `agentenv serve` is
stopped (SIGTERM) while all 32 of a step's rollouts are mid-episode, and
started again on the same address RESTART_AFTER seconds later."""

import asyncio
import time

import pytest
from conftest import GRIDSIM, Server, batch, call, make_generator, END

RESTART_AFTER = 6.0  # seconds between the server's exit and its start
GROUPS, SAMPLES = 4, 8  # 32 rollouts: 4 days x 8, as the page's steps


def restart_scenario(server, rows, attempts_seen):
    """Plays one step of 32 rollouts; each waits before its second reply
    until the server has been stopped. Returns the generator's output and
    how long the step took, the schedules its rollouts submitted and the next
    step's output."""

    async def scenario():
        gate, everyone = asyncio.Event(), asyncio.Event()
        waiting = 0

        async def policy(messages, tid):
            nonlocal waiting
            replies = sum(1 for role, _ in messages if role == "assistant")
            if replies == 0:
                return call("get_prices", {})
            if replies == 1:
                if not gate.is_set():  # the first attempt: the episode is live on the server
                    waiting += 1
                    if waiting == GROUPS * SAMPLES:
                        everyone.set()
                    await gate.wait()
                attempts_seen.append(tid.to_string())
                return call("submit_schedule", {"schedule": [0] * 24})
            return "Done." + END

        generator = make_generator(policy, workers=64)

        async def restart():
            await everyone.wait()
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, server.stop)
            gate.set()
            await asyncio.sleep(RESTART_AFTER)  # the downtime under test, not a wait for an event
            await loop.run_in_executor(None, server.start)

        began = time.monotonic()
        out, _ = await asyncio.gather(generator.generate(batch(rows, n_samples=SAMPLES)), restart())
        took = time.monotonic() - began
        submitted = len(attempts_seen)
        after = await generator.generate(batch(rows, n_samples=SAMPLES))
        return out, took, submitted, after

    return asyncio.run(scenario())


@pytest.mark.parametrize("attempts", [3, 1])
def test_server_restart_mid_episode(agentenv_bin, attempts):
    server = Server(agentenv_bin, GRIDSIM).start()
    try:
        rows = server.rows("train", GROUPS, attempts=attempts, reset_timeout=120)
        seen = []
        out, took, submitted, after = restart_scenario(server, rows, seen)
    finally:
        server.close()
    m = out["rollout_metrics"]
    rollouts = GROUPS * SAMPLES
    if attempts == 3:
        # Every rollout played again once the server was back, and scored.
        assert m["environment/avg_attempts"] == 2.0 and m["environment/avg_failed"] == 0.0
        assert [sum(r) for r in out["rewards"]] == [0.2] * rollouts
        assert m["environment/avg_score/grade"] == pytest.approx(0.2)
        assert all(any(mask) for mask in out["loss_masks"])
        assert "generate/num_masked_instances" not in m
        assert took >= RESTART_AFTER  # the replays waited for the restart rather than failing
    else:
        # Failed, and their groups left out: no loss mask, no reward.
        assert m["environment/avg_attempts"] == 1.0 and m["environment/avg_failed"] == 1.0
        assert all(not any(mask) for mask in out["loss_masks"])
        assert all(sum(r) == 0.0 for r in out["rewards"])
        assert m["generate/num_masked_instances"] == GROUPS
    assert submitted == rollouts * (2 if attempts == 3 else 1)
    # The steps after: as before.
    am = after["rollout_metrics"]
    assert am["environment/avg_attempts"] == 1.0 and am["environment/avg_failed"] == 0.0
    assert [sum(r) for r in after["rewards"]] == [0.2] * rollouts
    print(f"attempts {attempts}: avg_attempts {m['environment/avg_attempts']}, avg_failed {m['environment/avg_failed']}, "
          f"step {took:.1f} s, {submitted} submissions")
