"""The model endpoint of a run or an agent (``--client.*``): an OpenAI-compatible base URL,
the variable holding its key, and extra headers. ``eval`` relays text; ``train`` asks the
server for token ids and logprobs (a vf-serve or vLLM endpoint)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from verifiers.v1.configs.base import BaseConfig


class BaseClientConfig(BaseConfig):
    base_url: str | None = None
    """The endpoint (None: the run's default, the SDK's embedded model)."""
    api_key_var: str = "OPENAI_API_KEY"
    """The environment variable that holds the key (never the key itself)."""
    headers: dict[str, str] = Field(default_factory=dict)


class EvalClientConfig(BaseClientConfig):
    type: Literal["eval"] = "eval"


class TrainClientConfig(BaseClientConfig):
    type: Literal["train"] = "train"
    renderer: dict[str, Any] | None = None
    """The chat renderer (None: chosen from the model)."""
    renderer_model_name: str | None = None
    """The model whose tokenizer renders (None: the request's model)."""
    multiplex: int = Field(256, ge=1)
    """Concurrent rollouts sharing one renderer."""


ClientConfig = Annotated[EvalClientConfig | TrainClientConfig, Field(discriminator="type")]
