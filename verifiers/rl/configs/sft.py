"""vf-sft's settings, declared once, beside vf-rl's (``verifiers.rl.configs.rl``): the data, the
held-out eval, and the trainer and inference sections vf-rl declares, with SFT's defaults."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from verifiers.local_model.models import DEFAULT_MODEL
from verifiers.rl.configs.rl import (
    InferenceConfig,
    Tracker,
    TrainerConfig,
    _Strict,
    resolve_autocast,
)


class SFTDataConfig(_Strict):
    """The conversations to train on."""

    path: str = Field(
        default="data/uppercase-best",
        description="a vf-data dataset, a dataset directory, or a .parquet / .jsonl / .json file",
    )
    split: str = Field(default="train", description="the split of a dataset directory")
    max_tokens: int = Field(
        default=2048, ge=8, description="longer conversations are skipped (and counted)"
    )


class SFTEvalConfig(_Strict):
    """Held-out reward on an environment while training."""

    env_id: str | None = Field(
        default=None, description="held-out reward on this environment's eval split; none: off"
    )
    env_args: dict[str, Any] = Field(
        default_factory=dict, description="keyword arguments of load_environment"
    )
    every: int = Field(
        default=0,
        ge=0,
        description="steps between evals; 0: before the first step and after the last only",
    )
    examples: int = Field(default=32, ge=1, description="held-out examples per eval")
    max_tokens: int = Field(default=64, ge=1, description="completion token limit")
    temperature: float = Field(default=0.7, gt=0, description="sampling temperature")


SFT_TRAINER = {"loss": "sft", "lr": 2e-5}
"""What vf-sft's trainer section defaults to, where it differs from vf-rl's."""


class SFTConfig(_Strict):
    model: str = Field(
        default=DEFAULT_MODEL, description="embedded model name or a local HF model directory"
    )
    output_dir: str = Field(default="outputs/sft/run", description="where the run is written")
    data: SFTDataConfig = Field(default_factory=SFTDataConfig, description=SFTDataConfig.__doc__)
    epochs: int = Field(default=1, ge=1, description="passes over the data (unless steps is set)")
    steps: int | None = Field(
        default=None, ge=1, description="optimizer steps (none: epochs over the data)"
    )
    batch_size: int = Field(default=16, ge=1, description="conversations per optimizer step")
    checkpoint_every: int = Field(default=0, ge=0, description="steps between checkpoints; 0: off")
    keep_checkpoints: int = Field(
        default=2, ge=0, description="newest N kept in output_dir/checkpoints; 0: all"
    )
    seed: int = Field(default=0, description="seed of the batches' shuffle")
    report_to: list[Tracker] = Field(
        default_factory=list, description="metrics also to TensorBoard and W&B, as vf-rl's"
    )
    trainer: TrainerConfig = Field(
        default_factory=lambda: TrainerConfig(**SFT_TRAINER),
        description=f"{TrainerConfig.__doc__} (vf-sft's defaults: {SFT_TRAINER})",
    )
    inference: InferenceConfig = Field(
        default_factory=InferenceConfig, description="the server [eval] samples from"
    )
    eval: SFTEvalConfig = Field(default_factory=SFTEvalConfig, description=SFTEvalConfig.__doc__)

    @model_validator(mode="before")
    @classmethod
    def _sft_loss_by_default(cls, data: Any) -> Any:
        """A ``[trainer]`` table that names no loss still trains with SFT's."""
        if isinstance(data, dict) and isinstance(data.get("trainer"), dict):
            data = {**data, "trainer": {**SFT_TRAINER, **data["trainer"]}}
        return data

    @model_validator(mode="after")
    def _the_sft_loss(self) -> SFTConfig:
        if self.trainer.loss.name != "sft":
            raise ValueError("vf-sft trains with trainer.loss = 'sft'; the RL losses are vf-rl's")
        resolve_autocast(self.trainer, self.inference)
        return self
