"""One agent's seat in an env (``--env.<role>.*``): its harness, runtime, model and caps."""

from __future__ import annotations

from typing import Any

from pydantic import SerializeAsAny, model_validator

from verifiers.v1.configs.base import BaseConfig
from verifiers.v1.configs.client import ClientConfig
from verifiers.v1.configs.harness import HarnessConfig, WireHarnessConfig
from verifiers.v1.configs.retries import RetryConfig
from verifiers.v1.configs.runtime import RuntimeConfig, SubprocessConfig
from verifiers.v1.types import SamplingConfig

DEFAULT_MAX_TURNS = 10
"""The turn cap a seat gets under vf-eval when neither its env, its taskset's config nor
``-a`` sets one (upstream's ``AgentConfig.max_turns`` is None, no cap): classic ``ToolEnv``'s
default, so that a model that calls tools forever still ends its rollout, as
``stop_condition`` "max_turns" and truncated."""


class TimeoutConfig(BaseConfig):
    """Seconds each phase of an agent's run may take (None: no limit)."""

    setup: float | None = None
    rollout: float | None = None
    finalize: float | None = None
    scoring: float | None = None


class AgentConfig(BaseConfig):
    harness: SerializeAsAny[HarnessConfig] | None = None
    """The program playing the seat (None: the taskset's own harness, else ``bash``)."""
    runtime: RuntimeConfig = SubprocessConfig()
    """Where the harness program runs."""
    model: str | None = None
    """The model (None: the run's model, the policy being evaluated or trained)."""
    client: ClientConfig | None = None
    """The endpoint (None: the run's)."""
    sampling: SamplingConfig | None = None
    """Sampling settings laid over the run's."""
    max_turns: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None
    timeout: TimeoutConfig = TimeoutConfig()
    retries: RetryConfig = RetryConfig()

    @model_validator(mode="before")
    @classmethod
    def _narrow_harness(cls, data: Any) -> Any:
        """A pinned harness validates against its plugin's config type (kept loose when the
        plugin is not installed here)."""
        if isinstance(data, dict) and data.get("harness") is not None:
            from verifiers.v1.utils.plugin_fields import harness_config_type, narrow_plugin_field

            narrow_plugin_field(data, "harness", harness_config_type, WireHarnessConfig, "bash")
        return data


class WireAgentConfig(AgentConfig):
    """An agent config as a trace records it: read back anywhere, no plugin resolved."""

    harness: SerializeAsAny[WireHarnessConfig] | None = None

    @model_validator(mode="before")
    @classmethod
    def _narrow_harness(cls, data: Any) -> Any:
        return data
