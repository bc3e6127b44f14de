"""Stand-in for FullyAsyncRayPPOTrainer: asserts what SkyRL's asserts of the
generator settings, and joins a mini-batch of groups as SkyRL's does for
its metrics (the headline generation metrics over the kept groups plus any
dropped ones)."""

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from skyrl.train.entrypoints.main_base import RayPPOTrainer
from skyrl.train.generators.utils import concatenate_generator_outputs


@dataclass
class GeneratedOutputGroup:
    generator_output: Dict[str, Any]
    uid: str
    global_step_when_scheduled: int = 0
    prompts: Optional[List[Any]] = None


class FullyAsyncRayPPOTrainer(RayPPOTrainer):
    def __init__(self, cfg, **kwargs):
        assert cfg.trainer.fully_async.enabled, "FullyAsyncRayPPOTrainer needs trainer.fully_async.enabled=true"
        assert not cfg.generator.batched
        super().__init__(cfg, **kwargs)
        self.all_metrics = {}

    def convert_generation_group_mini_batch_to_training_input(self, cur_generation_group_mini_batch, dropped_groups=None):
        dropped_groups = dropped_groups or []
        output = concatenate_generator_outputs([g.generator_output for g in cur_generation_group_mini_batch])
        source = output
        if dropped_groups:
            source = concatenate_generator_outputs([g.generator_output for g in list(cur_generation_group_mini_batch) + dropped_groups])
        self.all_metrics.update(source["rollout_metrics"])
        output.pop("rollout_metrics", None)
        return output
