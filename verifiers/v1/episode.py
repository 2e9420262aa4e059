"""An episode: one env run's traces (one per agent run) and its own outcome, the unit a
results file and the env-server wire carry. ``WireEpisode`` reads one back anywhere."""

from __future__ import annotations

from typing import Any, Generic

from pydantic import BaseModel, Field

from verifiers.v1.configs.agent import WireAgentConfig
from verifiers.v1.state import State, StateT
from verifiers.v1.task_data import DataT, WireTaskData
from verifiers.v1.trace import Trace
from verifiers.v1.trace_parts import AgentConfigT, Error, TraceTask, new_id
from verifiers.v1.types import Usage


class EnvInfo(BaseModel):
    id: str = ""
    """The env's id (``EnvConfig.env_id``, e.g. ``best-of-n+gsm8k-v1``)."""


class Episode(BaseModel, Generic[DataT, StateT, AgentConfigT]):
    id: str = Field(default_factory=new_id)
    env: EnvInfo = Field(default_factory=EnvInfo)
    task: TraceTask[DataT] | None = None
    """The task the episode played. The v0.3.0 tag has no such field; verifiers 0.3.1's
    ``WireEpisode`` requires it, so the episodes this SDK writes carry it for both to read."""
    ok: bool = False
    errors: list[Error] = Field(default_factory=list)
    """The episode's own errors (each trace keeps its own)."""
    traces: list[Trace[DataT, StateT, AgentConfigT]] = Field(default_factory=list)
    """Every agent run's trace, in the order they finished."""

    @property
    def last_error(self) -> Error | None:
        return self.errors[-1] if self.errors else None

    @property
    def usage(self) -> Usage | None:
        return Usage.aggregate(u for t in self.traces if (u := t.usage) is not None)

    @property
    def num_input_tokens(self) -> int:
        return sum(t.num_input_tokens for t in self.traces)

    @property
    def num_output_tokens(self) -> int:
        return sum(t.num_output_tokens for t in self.traces)

    @property
    def num_total_tokens(self) -> int:
        return sum(t.num_total_tokens for t in self.traces)

    @property
    def num_turns(self) -> int:
        return sum(t.num_turns for t in self.traces)

    @property
    def by_agent(self) -> dict[str, list[Trace[DataT, StateT, AgentConfigT]]]:
        grouped: dict[str, list[Trace[DataT, StateT, AgentConfigT]]] = {}
        for trace in self.traces:
            grouped.setdefault(trace.agent.name, []).append(trace)
        return grouped

    @classmethod
    def of(cls, trace: Trace, env: str = "") -> Episode[Any, Any, Any]:
        """A single-agent episode: one trace."""
        return cls(env=EnvInfo(id=env), task=trace.task, traces=[trace], ok=trace.ok)


TRACES_FILE = "traces.jsonl"
"""The file a run appends its episodes to, one ``WireEpisode`` a line (``vf-eval``'s run
directory, ``run_eval``'s ``output_dir``)."""

WireEpisode = Episode[WireTaskData, State, WireAgentConfig]
"""An episode record read without the packages that produced it."""
