"""`python -m agentenv_skyrl.train` driven through the stand-ins: the env is
registered inside the Ray task, AgentEnvGenerator generates there, the rows'
token variable reaches the task, and the fully async trainer is picked from
trainer.fully_async.enabled."""

import os
from types import SimpleNamespace

import pytest
import ray
import skyrl_gym
from conftest import GRIDSIM, TOKEN, TOKEN_VAR, CharTokenizer, ScriptedEngine, Server, batch, gridsim_policy
from skyrl.train.entrypoints import main_base

from agentenv_skyrl import train


@pytest.fixture
def token_server(agentenv_bin):
    s = Server(agentenv_bin, GRIDSIM, ["--token-var", TOKEN_VAR], env={TOKEN_VAR: TOKEN}).start()
    yield s
    s.close()


@pytest.fixture
def rows_files(tmp_path, token_server, monkeypatch):
    """data/train.parquet and data/eval.parquet, whose `server` column the
    driver reads (pyarrow stands outside these tests: the reader is swapped)."""
    rows = {"train": token_server.rows("train", 2, token_var=TOKEN_VAR),
            "eval": token_server.rows("eval", 1, token_var=TOKEN_VAR)}
    paths = {}
    for split in rows:
        paths[split] = tmp_path / f"{split}.parquet"
        paths[split].write_bytes(b"")
    by_path = {str(paths[s]): [r["server"] for r in rows[s]] for s in rows}
    monkeypatch.setattr(train, "read_servers", lambda path: by_path[path])
    return paths, rows


def overrides(paths, *more):
    return [f"data.train_data=['{paths['train']}']", f"data.val_data=['{paths['eval']}']",
            "environment.env_class=agentenv", "environment.skyrl_gym.max_env_workers=64",
            "generator.batched=false", "generator.max_turns=4", *more]


@pytest.mark.parametrize("fully_async", [False, True])
def test_train_runs_the_env_in_the_ray_task(rows_files, monkeypatch, fully_async):
    paths, rows = rows_files
    monkeypatch.setenv(TOKEN_VAR, TOKEN)
    skyrl_gym.envs.registration.deregister("agentenv")  # the task must register it itself
    seen = {}

    def on_run(trainer):
        import asyncio

        seen["registered"] = "agentenv" in skyrl_gym.registry
        seen["token"] = os.environ.get(TOKEN_VAR) == TOKEN
        seen["generator"] = type(trainer.generator).__name__
        seen["trainer"] = [c.__name__ for c in type(trainer).__mro__ if c.__name__.endswith("RayPPOTrainer")][0]
        out = asyncio.run(trainer.generator.generate(batch(rows["train"], n_samples=2)))
        seen["rewards"] = [sum(r) for r in out["rewards"]]

    monkeypatch.setattr(main_base.BasePPOExp, "on_run", staticmethod(on_run))
    monkeypatch.setattr(main_base.BasePPOExp, "tokenizer", CharTokenizer())
    monkeypatch.setattr(main_base.BasePPOExp, "inference_engine_client", ScriptedEngine(gridsim_policy("idle")))
    more = ["trainer.fully_async.enabled=true"] if fully_async else []
    train.main(overrides(paths, *more))
    assert seen == {
        "registered": True,
        "token": True,
        "generator": "AgentEnvGenerator",
        "trainer": "FullyAsyncRayPPOTrainer" if fully_async else "RayPPOTrainer",
        "rewards": [0.2] * 4,
    }
    assert ray.INITIALIZED  # SkyRL's initialize_ray ran before the task


def test_get_trainer_matches_the_base_signature(rows_files):
    import inspect

    paths, _ = rows_files
    cfg = SimpleNamespace(generator=SimpleNamespace(), trainer=SimpleNamespace())
    ours = inspect.signature(type(train.experiment(cfg)).get_trainer)
    assert list(ours.parameters) == list(inspect.signature(main_base.BasePPOExp.get_trainer).parameters)


def test_train_refuses_an_unset_token_variable(rows_files, monkeypatch):
    paths, _ = rows_files
    monkeypatch.delenv(TOKEN_VAR, raising=False)
    with pytest.raises(SystemExit, match=f"name \\${TOKEN_VAR} for their server's token, but it is not set"):
        train.main(overrides(paths))


def test_train_refuses_batched(rows_files):
    paths, _ = rows_files
    with pytest.raises(SystemExit, match="batched generation plays one turn without the env's steps"):
        train.main(overrides(paths, "generator.batched=true"))


def test_token_secrets_come_from_the_rows_files(rows_files, monkeypatch):
    paths, rows = rows_files
    monkeypatch.setenv(TOKEN_VAR, TOKEN)
    cfg = SimpleNamespace(data=SimpleNamespace(train_data=[str(paths["train"])],
                                               val_data=[str(paths["eval"]), "org/a-hub-dataset"]))
    assert train.row_files(cfg) == [str(paths["train"]), str(paths["eval"])]  # hub names are not rows files
    assert train.token_secrets(train.row_files(cfg)) == {TOKEN_VAR: TOKEN}
    assert TOKEN not in repr(rows)  # the rows name the variable, never the token


def test_train_outside_skyrl_says_where_to_run_it(tmp_path):
    """Outside SkyRL's environment (no ray, no skyrl) the entry point says
    where to run it instead of a ModuleNotFoundError traceback."""
    import subprocess
    import sys

    pkg = os.path.dirname(os.path.dirname(os.path.abspath(train.__file__)))
    # agentenv_skyrl and what it installs with (agentenv_episode), nothing of SkyRL's.
    episode = os.path.join(os.path.dirname(pkg), "episode")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join([pkg, episode]), "HOME": str(tmp_path)}
    probe = subprocess.run([sys.executable, "-c", "import ray"], env=env, capture_output=True)
    if probe.returncode == 0:
        pytest.skip("this Python has a real ray: not outside SkyRL's environment")
    r = subprocess.run([sys.executable, "-m", "agentenv_skyrl.train", "trainer.epochs=1"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r
    assert "Traceback" not in r.stderr, r.stderr
    assert "'ray' is not installed in this Python" in r.stderr, r.stderr
    assert "SkyRL/.venv/bin/python -m agentenv_skyrl.train" in r.stderr, r.stderr
