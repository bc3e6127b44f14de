"""Stand-in for BasePPOExp: run() builds the generator and the trainer as
SkyRL's does and hands them to the test (tests/standin/README.md)."""

RUNS = []  # what each run built, for the tests


class RayPPOTrainer:
    def __init__(self, cfg, tracker, tokenizer, train_dataset, eval_dataset, inference_engine_client, generator, colocate_pg):
        self.cfg, self.generator = cfg, generator


class BasePPOExp:
    tokenizer = None  # a test sets these, and on_run(trainer), which runs
    inference_engine_client = None  # inside the task as SkyRL's training loop would
    on_run = None

    def __init__(self, cfg):
        self.cfg = cfg

    def get_generator(self, cfg, tokenizer, inference_engine_client):
        from skyrl.train.generators.skyrl_gym_generator import SkyRLGymGenerator

        return SkyRLGymGenerator(cfg.generator, cfg.environment.skyrl_gym, inference_engine_client, tokenizer)

    def get_trainer(self, cfg, tracker, tokenizer, train_dataset, eval_dataset, inference_engine_client, generator, colocate_pg):
        return RayPPOTrainer(cfg=cfg, tracker=tracker, tokenizer=tokenizer, train_dataset=train_dataset,
                             eval_dataset=eval_dataset, inference_engine_client=inference_engine_client,
                             generator=generator, colocate_pg=colocate_pg)

    def run(self):
        generator = self.get_generator(self.cfg, self.tokenizer, self.inference_engine_client)
        trainer = self.get_trainer(cfg=self.cfg, tracker=None, tokenizer=self.tokenizer, train_dataset=None, eval_dataset=None,
                                   inference_engine_client=self.inference_engine_client, generator=generator, colocate_pg=None)
        RUNS.append(trainer)
        if BasePPOExp.on_run is not None:
            BasePPOExp.on_run(trainer)
