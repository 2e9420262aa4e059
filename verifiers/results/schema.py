"""The on-disk results schema (versioned). Rows are written as plain JSON for speed and read
back through these models, so the models are the contract for tools that consume results."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
RunStatus = Literal["running", "completed", "interrupted", "failed"]


class ErrorRecord(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    message: str
    phase: str


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class RolloutRecord(BaseModel):
    """One line of ``results.jsonl``: one finished (scored) rollout."""

    model_config = ConfigDict(extra="allow")
    example_id: int
    rollout_index: int
    prompt: str | list[dict[str, Any]]
    completion: str | list[dict[str, Any]]
    answer: Any = ""
    info: dict[str, Any] = Field(default_factory=dict)
    task: Any = "default"
    reward: float
    advantage: float | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    error: ErrorRecord | None = None
    reward_errors: list[ErrorRecord] = Field(default_factory=list)
    stop_condition: str | None = None
    turns: int = 0
    is_truncated: bool = False
    timing: dict[str, float] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)


class RunSummary(BaseModel):
    """Aggregates over every rollout of a run (recomputed on resume from all rows)."""

    num_rollouts: int = 0
    num_examples: int = 0
    num_errors: int = 0
    avg_reward: float | None = None
    std_reward: float | None = None
    avg_metrics: dict[str, float] = Field(default_factory=dict)
    pass_at_k: dict[str, float] = Field(default_factory=dict)
    pass_all_k: dict[str, float] = Field(default_factory=dict)
    pass_threshold: float = 0.5
    errors_by_type: dict[str, int] = Field(default_factory=dict)
    reward_errors_by_function: dict[str, int] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    avg_generation_ms: float | None = None
    avg_scoring_ms: float | None = None


class RunMetadata(BaseModel):
    """``metadata.json``: what ran, against what, and how it went."""

    model_config = ConfigDict(extra="allow")
    schema_version: int = SCHEMA_VERSION
    # one id per run, kept across resumes: the hub attaches a run to a version once
    run_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    status: RunStatus = "running"
    env_id: str
    env_args: dict[str, Any] = Field(default_factory=dict)
    env_version: str | None = None
    env_content_hash: str | None = None
    verifiers_version: str
    # the classic release the environment ran as (its package's requirement, vf.written_for,
    # VF_API_VERSION, else the latest); an EnvGroup adds each member's as ``member_releases``
    release: str | None = None
    model: str
    base_url: str | None = None
    sampling_args: dict[str, Any] = Field(default_factory=dict)
    num_examples: int
    rollouts_per_example: int
    max_concurrent: int = -1
    started_at: str
    finished_at: str | None = None
    duration_s: float = 0.0
    resumed: int = 0
    summary: RunSummary = Field(default_factory=RunSummary)
