"""One rollout of a group failed by the env on a live server: replayed,
its group left out, or (in an eval) scored 0; and an episode that ends
unscored, which raises."""

from pathlib import Path

import pytest
from conftest import END, GRIDSIM, Server, batch, call, generate, make_generator

from agentenv_skyrl import AgentEnvError

# A reply over the server's 16 MiB frame limit: answered MESSAGE_TOO_LARGE,
# which the env takes as its failure of the rollout.
TOO_LARGE = "x" * (17 << 20)


def failing_once(victim):
    """Idles; rollout `victim` sends a reply the server refuses, first attempt only."""
    failed = set()

    def policy(messages, tid):
        replies = sum(1 for role, _ in messages if role == "assistant")
        if tid.to_string() == victim and victim not in failed:
            failed.add(victim)
            return TOO_LARGE
        return call("submit_schedule", {"schedule": [0] * 24}) if replies == 0 else "Done." + END

    return policy


@pytest.fixture(scope="module")
def server(agentenv_bin):
    s = Server(agentenv_bin, GRIDSIM).start()
    yield s
    s.close()


def test_a_rollout_failed_on_every_attempt_leaves_its_group_out(server):
    rows = server.rows("eval", 2, attempts=1)
    out = generate(make_generator(failing_once("0_3")), batch(rows, n_samples=8))
    # Group 0 (rows 0-7) out of the loss and the baseline; group 1 as played.
    assert all(not any(out["loss_masks"][i]) and sum(out["rewards"][i]) == 0.0 for i in range(8))
    assert all(any(out["loss_masks"][i]) and sum(out["rewards"][i]) == 0.2 for i in range(8, 16))
    m = out["rollout_metrics"]
    assert m["generate/num_masked_instances"] == 1
    assert m["environment/avg_failed"] == pytest.approx(1 / 16)
    assert out["env_metrics"][3] == {"attempts": 1, "failed": 1}


def test_a_failed_rollout_is_played_again(server):
    rows = server.rows("eval", 2, attempts=3)
    out = generate(make_generator(failing_once("1_5")), batch(rows, n_samples=8))
    assert [sum(r) for r in out["rewards"]] == [0.2] * 16
    assert out["env_metrics"][13]["attempts"] == 2 and out["env_metrics"][13]["failed"] == 0
    m = out["rollout_metrics"]
    assert m["environment/avg_attempts"] == pytest.approx(17 / 16) and m["environment/avg_failed"] == 0.0
    assert "generate/num_masked_instances" not in m
    # The replay's response is the new episode's: a schedule, not the refused reply.
    assert "".join(map(chr, out["response_ids"][13])).startswith("<tool_call>")


def test_in_an_eval_a_failed_rollout_scores_0(server):
    rows = server.rows("eval", 2, attempts=1)
    out = generate(make_generator(failing_once("0_0")), batch(rows, n_samples=2, phase="eval"))
    assert [sum(r) for r in out["rewards"]] == [0.0, 0.2, 0.2, 0.2]
    assert all(any(mask) for mask in out["loss_masks"])
    assert "generate/num_masked_instances" not in out["rollout_metrics"]


def test_an_episode_that_ends_unscored_raises(agentenv_bin, server, tmp_path):
    # GridSim's env with a task that never loads its day: the grade verifier errors.
    binary = Path(GRIDSIM, "envs", "gridsim", "bin", "gridsim-env")
    assert binary.exists()  # built by the server fixture's start
    bundle = tmp_path / "unscored"
    (bundle / "envs" / "gridsim").mkdir(parents=True)
    (bundle / "tasks").mkdir()
    (bundle / "README.md").write_text("A GridSim day never loaded, so its grade fails.\n")
    (bundle / "envs" / "gridsim" / "env.toml").write_text(f'command = ["{binary}"]\nport = 18765\n')
    (bundle / "tasks" / "unloaded.json").write_text(
        '[{"id": "env", "type": "deploy_env", "env": "gridsim"},'
        ' {"id": "play", "type": "prompt_agent", "prompt": "Reply when ready."},'
        ' {"id": "grade", "type": "verify_tool", "tool": "grade", "arguments": {}}]'
    )
    unscored = Server(agentenv_bin, bundle).start()
    try:
        rows = unscored.rows("all", 1)
        with pytest.raises(AgentEnvError, match="task unloaded .* ended unscored .*no day is loaded.*no replay changes that"):
            generate(make_generator(lambda messages, tid: "Ready." + END), batch(rows))
    finally:
        unscored.close()
