"""Stand-in for FullyAsyncRayPPOTrainer: asserts what SkyRL's asserts of the
generator settings."""

from skyrl.train.entrypoints.main_base import RayPPOTrainer


class FullyAsyncRayPPOTrainer(RayPPOTrainer):
    def __init__(self, cfg, **kwargs):
        assert cfg.trainer.fully_async.enabled, "FullyAsyncRayPPOTrainer needs trainer.fully_async.enabled=true"
        assert not cfg.generator.batched
        super().__init__(cfg, **kwargs)
