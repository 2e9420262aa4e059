"""How an env is served under ``vf-eval --server`` (``[serve]``): the worker pool's shape."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from verifiers.v1.configs.base import BaseConfig


class StaticPoolConfig(BaseConfig):
    type: Literal["static"] = "static"
    num_workers: int = Field(4, ge=1)


class ElasticPoolConfig(BaseConfig):
    type: Literal["elastic"] = "elastic"
    max_workers: int | None = None
    multiplex: int = Field(128, ge=1)


PoolConfig = Annotated[StaticPoolConfig | ElasticPoolConfig, Field(discriminator="type")]


class ServeConfig(BaseConfig):
    pool: PoolConfig = Field(default_factory=ElasticPoolConfig)
    address: str = "tcp://127.0.0.1:5000"
    max_concurrent: int | None = Field(None, ge=1)
    """Episodes one worker runs at once (None: the run's ``max_concurrent``)."""
