"""A rollout's framework limits (upstream's ``verifiers.v1.session.RolloutLimits``): the caps
an ``AgentConfig`` sets on turns and tokens, checked before each model call. The first one
reached ends the rollout as a stop hook does and becomes the trace's ``stop_condition`` (one
of ``TRUNCATING_STOPS``, so the trace reads as truncated)."""

from __future__ import annotations

from dataclasses import dataclass

from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.trace import Trace


@dataclass(frozen=True)
class RolloutLimits:
    """Per-rollout caps (None: no cap). Token caps are soft by one turn: they are checked
    between turns, so the turn that crosses one still completes."""

    max_turns: int | None = None
    max_input_tokens: int | None = None
    max_output_tokens: int | None = None
    max_total_tokens: int | None = None

    @classmethod
    def of(cls, config: AgentConfig) -> RolloutLimits:
        return cls(
            max_turns=config.max_turns,
            max_input_tokens=config.max_input_tokens,
            max_output_tokens=config.max_output_tokens,
            max_total_tokens=config.max_total_tokens,
        )

    def reached(self, trace: Trace) -> str | None:
        """The name of the first cap ``trace`` has reached (None: within all of them)."""
        if self.max_turns is not None and trace.num_turns >= self.max_turns:
            return "max_turns"
        if self.max_input_tokens is not None and trace.num_input_tokens >= self.max_input_tokens:
            return "max_input_tokens"
        if self.max_output_tokens is not None and trace.num_output_tokens >= self.max_output_tokens:
            return "max_output_tokens"
        if self.max_total_tokens is not None and trace.num_total_tokens >= self.max_total_tokens:
            return "max_total_tokens"
        return None
