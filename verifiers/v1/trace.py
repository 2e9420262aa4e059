"""The trace: everything one agent's rollout produced, as one pydantic record.

It holds the message graph (``nodes``, see ``graph.py``), every model call, the advertised
tools, named weighted rewards and metrics (None: due but not scored), errors, timing, and
who ran what. Derived values (``reward``, ``num_turns``, ``branches``, ``is_truncated``) are
properties, so a dumped trace re-validates with plain pydantic and they recompute. ``state``
is the rollout's live state and is never dumped. ``WireTrace`` reads a record without the
packages that produced it (the taskset's fields land in ``task.data.model_extra``).
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from typing import Any, Generic

from pydantic import BaseModel, Field, PrivateAttr

from verifiers.v1.branch import Branch
from verifiers.v1.configs.agent import WireAgentConfig
from verifiers.v1.errors import ProviderError
from verifiers.v1.nodes import MessageNode, leaf_ids
from verifiers.v1.state import State, StateT
from verifiers.v1.task_data import DataT, WireTaskData
from verifiers.v1.trace_parts import (
    AgentConfigT,
    AgentInfo,
    AgentSpan,
    Error,
    EvalRunInfo,
    ModelCall,
    Reward,
    RunInfo,
    TimeSpan,
    TimeSplit,
    Timing,
    TraceTask,
    TrainRunInfo,
    VersionInfo,
    current_version,
    new_id,
)
from verifiers.v1.types import AssistantMessage, Tool, ToolMessage, Usage, content_text

__all__ = [
    "TRACE_VERSION",
    "AgentInfo",
    "AgentSpan",
    "Branch",
    "Error",
    "EvalRunInfo",
    "ModelCall",
    "Reward",
    "RunInfo",
    "TimeSpan",
    "TimeSplit",
    "Timing",
    "Trace",
    "TraceTask",
    "TrainRunInfo",
    "VersionInfo",
    "WireTrace",
]

TRACE_VERSION = 1
"""The trace schema a ``Trace`` dumps as."""

TRUNCATING_STOPS = frozenset(
    {"max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens", "context_length"}
)

DISK_EXCLUDE: dict[str, Any] = {
    "nodes": {"__all__": {"multi_modal_data", "routed_experts", "kept_tokens"}}
}
"""The array sidecars that cross a process wire but stay out of records on disk."""


class Trace(BaseModel, Generic[DataT, StateT, AgentConfigT]):
    version: int = TRACE_VERSION
    id: str = Field(default_factory=new_id)
    verifiers: VersionInfo = Field(default_factory=current_version)
    """The SDK release that produced the trace."""
    run: RunInfo | None = None
    task: TraceTask[DataT]
    agent: AgentInfo[AgentConfigT]
    tools: list[Tool] = Field(default_factory=list)
    """The tools offered to the agent (as of its last model call)."""
    nodes: list[MessageNode] = Field(default_factory=list)
    calls: list[ModelCall] = Field(default_factory=list)
    rewards: dict[str, Reward | None] = Field(default_factory=dict)
    metrics: dict[str, float | None] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)
    """The task's own notes."""
    state: StateT = Field(default_factory=State, exclude=True)  # type: ignore[assignment]  # State is StateT's default
    extra_usage: list[Usage] = Field(default_factory=list)
    """Usage of calls outside the agent's graph (judges)."""
    is_completed: bool = False
    ok: bool = False
    stop_condition: str | None = None
    errors: list[Error] = Field(default_factory=list)
    """Every error captured, across attempts, oldest first."""
    timing: Timing = Field(default_factory=Timing)

    _graph_index: dict[tuple[int | None, str], int] = PrivateAttr(default_factory=dict)

    @property
    def reward(self) -> float:
        """The weighted sum of the scored rewards."""
        return sum(r.value for r in self.rewards.values() if r is not None)

    @property
    def has_error(self) -> bool:
        return not self.ok

    @property
    def usage(self) -> Usage | None:
        return Usage.aggregate(c.usage for c in self.calls if c.usage is not None)

    @property
    def branches(self) -> list[Branch]:
        """One per leaf of the graph, root first, with the model calls on its path."""
        by_node = {c.node: c for c in self.calls if c.node is not None}
        out: list[Branch] = []
        for i, leaf in enumerate(leaf_ids(self.nodes)):
            path: list[int] = []
            nid: int | None = leaf
            while nid is not None:
                path.append(nid)
                nid = self.nodes[nid].parent
            path.reverse()
            out.append(
                Branch(
                    index=i,
                    nodes=[self.nodes[n] for n in path],
                    calls=[by_node[n] for n in path if n in by_node],
                )
            )
        return out

    @property
    def num_branches(self) -> int:
        return len(leaf_ids(self.nodes))

    @property
    def num_turns(self) -> int:
        return sum(1 for node in self.nodes if node.sampled)

    @property
    def num_input_tokens(self) -> int:
        return sum(b.num_input_tokens for b in self.branches)

    @property
    def num_output_tokens(self) -> int:
        return sum(b.num_output_tokens for b in self.branches)

    @property
    def num_total_tokens(self) -> int:
        return sum(b.num_total_tokens for b in self.branches)

    @property
    def is_truncated(self) -> bool:
        """Stopped by a limit, or the last successful call ran out of length."""
        if self.stop_condition in TRUNCATING_STOPS:
            return True
        last = next((c for c in reversed(self.calls) if c.error is None), None)
        return bool(last and last.finish_reason == "length")

    @property
    def assistant_messages(self) -> list[AssistantMessage]:
        """The model's replies in order (prompt-supplied assistant messages left out)."""
        return [
            n.message for n in self.nodes if n.sampled and isinstance(n.message, AssistantMessage)
        ]

    @property
    def tool_messages(self) -> list[ToolMessage]:
        return [n.message for n in self.nodes if isinstance(n.message, ToolMessage)]

    @property
    def last_reply(self) -> str:
        replies = self.assistant_messages
        return (replies[-1].content or "").strip() if replies else ""

    @property
    def last_error(self) -> Error | None:
        return self.errors[-1] if self.errors else None

    @property
    def transcript(self) -> str:
        """The last branch as text (tool calls shown, tool results by name only)."""
        branches = self.branches
        blocks: list[str] = []
        for message in branches[-1].messages if branches else []:
            head = f"[{message.role}]"
            lines: list[str] = []
            if isinstance(message, AssistantMessage):
                lines += [message.content] if message.content else []
                lines += [f"[tool_call {c.name}({c.arguments})]" for c in message.tool_calls or []]
            else:
                if isinstance(message, ToolMessage) and message.name:
                    head = f"[{message.role} {message.name}]"
                if text := content_text(message.content):
                    lines.append(text)
            blocks.append("\n".join([head, *lines]))
        return "\n\n".join(blocks)

    def record_metric(self, name: str, value: float) -> None:
        self.metrics[name] = float(value)

    def record_metrics(self, values: Mapping[str, float]) -> None:
        for name, value in values.items():
            self.record_metric(name, value)

    def record_reward(self, name: str, value: float, weight: float = 1.0) -> None:
        self.rewards[name] = Reward(score=float(value), weight=float(weight))

    def record_judge(self, response: BaseModel) -> None:
        """Keep a judge call's reply on the trace (``info["judge"]``), its usage apart from
        the agent's (``extra_usage``)."""
        self.info.setdefault("judge", []).append(response.model_dump(mode="json"))
        usage = getattr(response, "usage", None)
        if isinstance(usage, Usage):
            self.extra_usage.append(usage)

    def record_run(self, run: RunInfo | None = None, **info: Any) -> None:
        if run is not None:
            self.run = run
        self.info.update(info)

    def stop(self, condition: str) -> None:
        """Mark the trace completed; the first stop condition given is the one kept."""
        self.is_completed = True
        if self.stop_condition is None:
            self.stop_condition = condition

    def split_agent_time(self) -> None:
        """Split the agent's span into model time (its calls) and harness time."""
        span = self.timing.agent
        if not span.end:
            return
        model = sum(call.time.duration for call in self.calls)
        span.model.duration = min(model, span.duration)
        span.harness.duration = span.duration - span.model.duration

    def record_error(self, error: BaseException) -> None:
        """Record ``error`` and stop the trace as failed (a provider error's message is the
        diagnosis; any other keeps its traceback)."""
        self.errors.append(
            Error(
                type=type(error).__name__,
                message=str(error),
                status_code=getattr(error, "status_code", None),
                traceback=None if isinstance(error, ProviderError) else traceback.format_exc(),
            )
        )
        self.ok = False
        self.stop("error")

    def to_record(self) -> dict[str, Any]:
        """The JSON record written to disk (array sidecars left out)."""
        return self.model_dump(mode="json", exclude=DISK_EXCLUDE)


WireTrace = Trace[WireTaskData, State, WireAgentConfig]
"""A trace record read without the packages that produced it."""
