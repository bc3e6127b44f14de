"""Stand-in for skyrl.train.generators.base."""

from dataclasses import dataclass


@dataclass
class TrajectoryID:
    instance_id: str
    repetition_id: int

    def to_string(self) -> str:
        return f"{self.instance_id}_{self.repetition_id}"


@dataclass
class BatchMetadata:
    global_step: int
    training_phase: str  # "train" or "eval"
