"""`python -m agentenv_skyrl.train [SkyRL overrides...]`: SkyRL's trainer with
the `agentenv` env registered and AgentEnvGenerator generating.

SkyRL's generator runs in a Ray task, on any node of the cluster. skyrl-gym's
registry is per process, so the env is registered inside that task; the
rows' token variables are read here, where training starts, and handed to the
task as arguments (Ray forwards no environment variable by itself, and a
runtime_env would show the token on Ray's dashboard). With
trainer.fully_async.enabled=true the task runs SkyRL's fully async trainer.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence

from agentenv_episode import ENV_ID

ENTRY_POINT = "agentenv_skyrl.env:AgentEnvTextEnv"


def register_env() -> None:
    """Registers `agentenv` in this process's skyrl-gym registry (once)."""
    import skyrl_gym

    spec = skyrl_gym.registry.get(ENV_ID)
    if spec is None:
        skyrl_gym.register(id=ENV_ID, entry_point=ENTRY_POINT)
    elif spec.entry_point != ENTRY_POINT:
        raise RuntimeError(f"skyrl-gym already has an env {ENV_ID!r} ({spec.entry_point}), not agentenv's {ENTRY_POINT}")


def row_files(cfg) -> List[str]:
    """The local parquet files of data.train_data and data.val_data."""
    paths: List[str] = []
    for name in ("train_data", "val_data"):
        for path in getattr(cfg.data, name, None) or []:
            if str(path).endswith(".parquet") and os.path.exists(path):
                paths.append(str(path))
    return paths


def read_servers(path: str) -> List[Mapping]:
    """The `server` column of a rows file (pyarrow is in SkyRL's environment)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, columns=["server"])
    return table.column("server").to_pylist()


def token_secrets(paths: Iterable[str], environ: Mapping[str, str] = os.environ,
                  read: Optional[Callable[[str], List[Mapping]]] = None) -> Dict[str, str]:
    """The token of every variable the rows name, from `environ`. A variable
    named but unset stops training before it starts."""
    read = read or read_servers
    named: Dict[str, str] = {}
    for path in paths:
        for server in read(path):
            var = (server or {}).get("token_var")
            if var and var not in named:
                named[var] = path
    secrets: Dict[str, str] = {}
    for var, path in sorted(named.items()):
        value = environ.get(var, "")
        if not value:
            raise SystemExit(
                f"agentenv_skyrl.train: the rows in {path} name ${var} for their server's token, but it is not set; "
                f"export it here: it is handed to the Ray task that generates"
            )
        secrets[var] = value
    return secrets


def experiment(cfg):
    """SkyRL's experiment with AgentEnvGenerator, and SkyRL's fully async
    trainer when trainer.fully_async.enabled=true."""
    from skyrl.train.entrypoints.main_base import BasePPOExp

    from .generator import generator_class

    class AgentEnvExp(BasePPOExp):
        def get_generator(self, cfg, tokenizer, inference_engine_client):
            from skyrl.backends.skyrl_train.inference_servers.utils import resolve_policy_model_name

            cls = generator_class(bool(getattr(cfg.generator, "vision_language_generator", False)))
            return cls(
                generator_cfg=cfg.generator,
                skyrl_gym_cfg=cfg.environment.skyrl_gym,
                inference_engine_client=inference_engine_client,
                tokenizer=tokenizer,
                policy_model_name=resolve_policy_model_name(cfg),
            )

        def get_trainer(self, cfg, tracker, tokenizer, train_dataset, eval_dataset, inference_engine_client, generator, colocate_pg):
            args = dict(cfg=cfg, tracker=tracker, tokenizer=tokenizer, train_dataset=train_dataset, eval_dataset=eval_dataset,
                        inference_engine_client=inference_engine_client, generator=generator, colocate_pg=colocate_pg)
            if not fully_async(cfg):
                return super().get_trainer(**args)
            return fully_async_trainer_class()(**args)

    return AgentEnvExp(cfg)


def fully_async_trainer_class() -> type:
    """SkyRL's fully async trainer, with the token metrics of each step's
    join computed over the groups trained on: SkyRL's join computes them
    again over every row, the rows of groups AgentEnvGenerator left out
    included, which the sync trainer (mask_failed) leaves out."""
    from skyrl.train.fully_async_trainer import FullyAsyncRayPPOTrainer

    from .generator import set_trained_metrics

    class AgentEnvFullyAsyncTrainer(FullyAsyncRayPPOTrainer):
        def convert_generation_group_mini_batch_to_training_input(self, cur_generation_group_mini_batch, dropped_groups=None):
            batch = super().convert_generation_group_mini_batch_to_training_input(cur_generation_group_mini_batch, dropped_groups)
            # The groups whose rows SkyRL's headline metrics cover, as it picks them.
            groups = list(cur_generation_group_mini_batch) + list(dropped_groups or [])
            joined: Dict[str, list] = {"response_ids": [], "rewards": [], "loss_masks": []}
            kept: List[int] = []
            for g in groups:
                out = g.generator_output
                left_out = (out.get("rollout_metrics") or {}).get("generate/num_masked_instances", 0) > 0
                for key in joined:
                    joined[key].extend(out[key])
                if not left_out:
                    kept.extend(range(len(joined["response_ids"]) - len(out["response_ids"]), len(joined["response_ids"])))
            if len(kept) < len(joined["response_ids"]):
                set_trained_metrics(self.all_metrics, joined, kept)
            return batch

    return AgentEnvFullyAsyncTrainer


def fully_async(cfg) -> bool:
    return bool(getattr(getattr(cfg.trainer, "fully_async", None), "enabled", False))


def entrypoint(cfg, secrets: Dict[str, str]) -> None:
    """The body of the Ray task: the tokens, the env, then SkyRL's run."""
    os.environ.update(secrets)
    register_env()
    experiment(cfg).run()


def main(argv: Optional[Sequence[str]] = None) -> None:
    try:
        import ray
        from skyrl.train.config import SkyRLTrainConfig
        from skyrl.train.utils import initialize_ray, validate_cfg
    except ModuleNotFoundError as e:
        # Run outside SkyRL's environment: say where to run it, not a traceback.
        raise SystemExit(
            f"agentenv_skyrl.train: {e.name!r} is not installed in this Python ({sys.executable}): "
            f"run it with SkyRL's environment, where agentenv_skyrl is installed "
            f"(SkyRL/.venv/bin/python -m agentenv_skyrl.train ...; docs/training-skyrl.md, Install)"
        ) from None

    cfg = SkyRLTrainConfig.from_cli_overrides(list(sys.argv[1:] if argv is None else argv))
    if cfg.generator.batched:
        from .generator import BATCHED_REFUSAL

        raise SystemExit(f"agentenv_skyrl.train: {BATCHED_REFUSAL}")
    validate_cfg(cfg)
    secrets = token_secrets(row_files(cfg))
    initialize_ray(cfg)
    # By the module's name, not __main__'s, so Ray ships a reference to it;
    # num_cpus=1 as SkyRL's own entrypoint task.
    from agentenv_skyrl.train import entrypoint as body

    task = ray.remote(num_cpus=1)(body)
    ray.get(task.remote(cfg, secrets))


if __name__ == "__main__":
    main()
