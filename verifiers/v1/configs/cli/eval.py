"""The v1 eval run's config: the ``[env]`` block (narrowed to the env's own config type), or
a classic env under ``[legacy]``, plus the model, sampling and how many rollouts.

Run-size keys accept the classic ``vf-eval`` spellings too (``num_examples``,
``rollouts_per_example``) so a config moves between the two APIs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import uuid4

from pydantic import AliasChoices, Field, SerializeAsAny, ValidationError, model_validator

from verifiers.v1.configs.base import BaseConfig
from verifiers.v1.configs.client import ClientConfig, EvalClientConfig
from verifiers.v1.configs.env import EnvConfig, SingleAgentEnvConfig
from verifiers.v1.configs.legacy import LegacyEnvConfig
from verifiers.v1.configs.serve import ServeConfig
from verifiers.v1.types import SamplingConfig


class EvalConfig(BaseConfig):
    env: SerializeAsAny[EnvConfig] = SingleAgentEnvConfig()
    serve: ServeConfig = ServeConfig()
    """The worker pool under ``server = true``."""
    legacy: LegacyEnvConfig = LegacyEnvConfig()
    uuid: str = Field(default_factory=lambda: str(uuid4()), exclude=True)
    """The run's id (the last part of its output directory); never saved."""
    model: str = Field("", validation_alias=AliasChoices("model", "m"))
    """The model (empty: the SDK's embedded model)."""
    client: ClientConfig = EvalClientConfig()
    sampling: SamplingConfig = SamplingConfig()
    num_tasks: int | None = Field(
        None, ge=1, validation_alias=AliasChoices("num_tasks", "num_examples", "batch_size", "n")
    )
    """Tasks to evaluate (None: all)."""
    num_rollouts: int = Field(
        1,
        ge=1,
        validation_alias=AliasChoices("num_rollouts", "rollouts_per_example", "group_size", "r"),
    )
    """Rollouts per task (the trainer's group size)."""
    shuffle: bool = Field(False, validation_alias=AliasChoices("shuffle", "s"))
    max_concurrent: int | None = Field(
        128, ge=1, validation_alias=AliasChoices("max_concurrent", "c")
    )
    verbose: bool = Field(False, validation_alias=AliasChoices("verbose", "v"))
    dry_run: bool = Field(False, exclude=True)
    rich: bool = True
    server: bool = False
    push: bool = False
    """Upload the finished run to a hub (off: this SDK pushes only when asked)."""
    output_dir: Path | None = Field(None, validation_alias=AliasChoices("output_dir", "o"))
    resume: Path | None = Field(None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _narrow_env(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("env") is not None:
            from verifiers.v1.utils.loaders import prefixed_error, resolve_env_config

            try:
                data = {**data, "env": resolve_env_config(data["env"])}
            except ValidationError as e:
                raise prefixed_error(e, ("env",)) from None
        return data

    @model_validator(mode="after")
    def _check_modes(self) -> EvalConfig:
        if self.server and self.rich:
            if "rich" in self.model_fields_set:
                raise ValueError(
                    "`rich` (the live dashboard) runs in process; drop it with `server`"
                )
            self.rich = False
        if self.legacy.id is not None and self.env.env_id:
            raise ValueError(
                f"legacy.id {self.legacy.id!r} is a classic env and cannot run beside the v1 "
                f"env {self.env.env_id!r}; keep the one you meant to run"
            )
        return self

    @property
    def is_legacy(self) -> bool:
        return self.legacy.id is not None and not self.env.taskset.id

    @property
    def env_id(self) -> str:
        return self.env.env_id or self.legacy.id or ""
