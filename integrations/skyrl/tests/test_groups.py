"""One rollout of a group failed by the env on a live server: replayed,
its group left out, or (in an eval) scored 0; and an episode that ends
unscored, which raises."""

from pathlib import Path

import logging
from statistics import mean

import pytest
from conftest import END, GRIDSIM, Cfg, Server, batch, call, generate, make_generator

from agentenv_skyrl import AgentEnvError
from agentenv_skyrl.train import fully_async_trainer_class

# A reply over the server's 16 MiB frame limit: answered MESSAGE_TOO_LARGE,
# which the env takes as its failure of the rollout.
TOO_LARGE = "x" * (17 << 20)


def failing_once(*victims):
    """Idles; the rollouts `victims` send a reply the server refuses, first attempt only."""
    failed = set()

    def policy(messages, tid):
        replies = sum(1 for role, _ in messages if role == "assistant")
        if tid.to_string() in victims and tid.to_string() not in failed:
            failed.add(tid.to_string())
            return TOO_LARGE
        return call("submit_schedule", {"schedule": [0] * 24}) if replies == 0 else "Done." + END

    return policy


@pytest.fixture(scope="module")
def server(agentenv_bin):
    s = Server(agentenv_bin, GRIDSIM).start()
    yield s
    s.close()


def trained(out, rows):
    """The token metrics over the given rows only: what is trained."""
    masks = [out["loss_masks"][i] for i in rows]
    return {"generate/avg_num_tokens": mean(len(out["response_ids"][i]) for i in rows),
            "generate/avg_assistant_tokens": mean(sum(m) for m in masks),
            "generate/max_num_tokens": max(len(out["response_ids"][i]) for i in rows)}


def test_a_rollout_failed_on_every_attempt_leaves_its_group_out(server, caplog):
    rows = server.rows("eval", 2, attempts=1)
    caplog.set_level(logging.WARNING, logger="agentenv_skyrl")
    out = generate(make_generator(failing_once("0_3", "0_5")), batch(rows, n_samples=8))
    # Group 0 (rows 0-7) out of the loss and the baseline; group 1 as played.
    assert all(not any(out["loss_masks"][i]) and sum(out["rewards"][i]) == 0.0 for i in range(8))
    assert all(any(out["loss_masks"][i]) and sum(out["rewards"][i]) == 0.2 for i in range(8, 16))
    m = out["rollout_metrics"]
    assert m["generate/num_masked_instances"] == 1
    assert m["environment/avg_failed"] == pytest.approx(2 / 16)
    assert out["env_metrics"][3] == {"attempts": 1, "failed": 1}
    # The token metrics are those of what is trained: group 1's rollouts,
    # not the refused replies of group 0.
    assert {k: m[k] for k in trained(out, range(8, 16))} == pytest.approx(trained(out, range(8, 16)))
    assert m["generate/avg_tokens_non_zero_rewards"] == pytest.approx(m["generate/avg_num_tokens"])
    # One "left out" warning for the group, however many of its rollouts
    # failed (the env warns of each attempt's failure, with its cause).
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "left out" in r.getMessage()]
    assert warnings == ["agentenv: 2 rollouts of group 0 failed on every attempt (task day/eval-001 (eval[0])); "
                        "the group is left out of training"], warnings


def test_the_fully_async_join_logs_the_token_metrics_of_what_is_trained(server):
    """SkyRL's fully async trainer generates one group per call and joins a
    mini-batch of them, computing the token metrics again over every row:
    agentenv's trainer computes them over the groups trained on, as the sync
    path does."""
    rows = server.rows("eval", 2, attempts=1)
    whole = batch(rows, n_samples=8)
    sync = generate(make_generator(failing_once("0_3")), whole)
    gen = make_generator(failing_once("0_3"))
    halves = [{k: (v[lo:lo + 8] if isinstance(v, list) else v) for k, v in whole.items()} for lo in (0, 8)]
    outs = [generate(gen, h) for h in halves]
    assert [o["rollout_metrics"].get("generate/num_masked_instances", 0) for o in outs] == [1, 0]
    from skyrl.train.fully_async_trainer import GeneratedOutputGroup

    cfg = Cfg(trainer=Cfg(fully_async=Cfg(enabled=True)), generator=Cfg(batched=False))
    trainer = fully_async_trainer_class()(cfg=cfg, tracker=None, tokenizer=None, train_dataset=None, eval_dataset=None,
                                          inference_engine_client=None, generator=gen, colocate_pg=None)
    joined = trainer.convert_generation_group_mini_batch_to_training_input(
        [GeneratedOutputGroup(generator_output=o, uid=str(i)) for i, o in enumerate(outs)])
    assert len(joined["response_ids"]) == 16  # every row is still trained on (group 0 masked)
    want = trained(sync, range(8, 16))
    assert {k: trainer.all_metrics[k] for k in want} == pytest.approx(want)
    assert {k: trainer.all_metrics[k] for k in want} == pytest.approx({k: sync["rollout_metrics"][k] for k in want})


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
