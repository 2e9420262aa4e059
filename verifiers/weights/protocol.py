"""The bodies of the weight-update routes, as both servers (vf-serve, vLLM) validate them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class LoadWeightsRequest(BaseModel):
    path: str
    policy_version: int | None = None


class BroadcastInitRequest(BaseModel):
    """Join the trainer's weight group (see ``verifiers.weights.group``)."""

    host: str  # the address gloo's connections meet at
    store_file: str = Field(min_length=1)  # the trainer's rendezvous store (WeightGroup)
    rank: int = Field(default=1, ge=1)
    world_size: int = Field(default=2, ge=2)
    backend: Literal["gloo", "nccl"] = "gloo"
    timeout_s: float = Field(default=300, gt=0, le=900)  # a join never waits unbounded
    tensors: list[dict[str, Any]] = Field(min_length=1)


class BroadcastUpdateRequest(BaseModel):
    policy_version: int | None = None
