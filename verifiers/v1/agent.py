"""An agent: a seat of an env (``AgentConfig``) bound to a model endpoint and a harness.

``agent.run(task)`` plays one task from its prompt: a trace is opened, the task sets up, the
harness converses until it is done, the task finalizes and scores. ``agent.interaction(task)``
does the same across several ``turn()``s, for an env that speaks between them (a scripted
user). Whatever fails inside (the model call, the harness, a hook) is recorded on the trace
as an error; the run goes on to the next task.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from verifiers.sandbox import SandboxLimits
from verifiers.v1.chat import open_client
from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.configs.client import BaseClientConfig, EvalClientConfig
from verifiers.v1.errors import HarnessError, RolloutError, TaskError
from verifiers.v1.harnesses import harness_for
from verifiers.v1.hooks import call_all, hooks_of
from verifiers.v1.runtimes.base import Runtime, check_runtime, open_runtime
from verifiers.v1.session import RolloutLimits
from verifiers.v1.state import state_cls
from verifiers.v1.task import Task, scores_in_runtime
from verifiers.v1.toolset import BoundTool
from verifiers.v1.trace import Trace
from verifiers.v1.trace_parts import AgentInfo, RunInfo, TraceTask
from verifiers.v1.types import (
    AssistantMessage,
    Message,
    SamplingConfig,
    SystemMessage,
    UserMessage,
)


@dataclass
class ModelContext:
    """The run's model: the endpoint and model name an agent falls back to, and sampling."""

    base_url: str | None = None
    model: str = ""
    api_key: str | None = None
    """The key for ``base_url`` (an agent's own client config reads its ``api_key_var``)."""
    headers: dict[str, str] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    run: RunInfo | None = None


def prompt_messages(task: Task) -> list[Message]:
    data = task.data
    messages: list[Message] = []
    if data.system_prompt:
        messages.append(SystemMessage(content=data.system_prompt))
    if isinstance(data.prompt, str):
        messages.append(UserMessage(content=data.prompt))
    elif data.prompt:
        messages.extend(data.prompt)
    return messages


@dataclass
class Segment:
    """What one ``Interaction.turn`` ended with."""

    terminated: bool
    """The rollout is over (an error, a stop hook, a turn limit): no further turn runs."""
    messages: list[Message]

    @property
    def last_reply(self) -> str:
        """This turn's final assistant text (after the user's last message), as upstream's
        ``Segment.last_reply``; empty when the turn produced none."""
        for message in reversed(self.messages):
            if isinstance(message, UserMessage):
                break
            if isinstance(message, AssistantMessage):
                return (message.content or "").strip()
        return ""


class Interaction:
    def __init__(
        self,
        agent: Agent,
        task: Task,
        trace: Trace,
        tools: list[BoundTool],
        runtime: Runtime | None = None,
    ) -> None:
        self.agent, self.task, self.trace, self.tools = agent, task, trace, tools
        self.runtime = runtime
        self.messages: list[Message] = prompt_messages(task)

    async def turn(self, messages: str | list[Message] | None = None) -> Segment:
        """Add ``messages`` (a user's turn: a string is one user message, as upstream's
        ``Interaction.turn`` takes it) and let the harness converse until it is done."""
        if self.trace.is_completed:
            return Segment(terminated=True, messages=self.messages)
        if isinstance(messages, str):
            messages = [UserMessage(content=messages)]
        self.messages = [*self.messages, *(messages or [])]
        try:
            self.messages = await self.agent.converse(
                self.task, self.trace, self.messages, self.tools, self.runtime
            )
        except Exception as e:
            self.trace.record_error(e)
        return Segment(terminated=self.trace.is_completed, messages=self.messages)


class Agent:
    def __init__(
        self,
        name: str,
        config: AgentConfig,
        context: ModelContext,
        toolsets: list[Any] | None = None,
    ) -> None:
        self.name, self.config, self.context = name, config, context
        self.shared_toolsets = list(toolsets or [])
        self.traces: list[Trace] = []
        harness = config.harness
        self.harness = harness_for(harness.id if harness is not None else "null")(harness)
        check_runtime(config.runtime)
        client = config.client or EvalClientConfig()
        self.endpoint: BaseClientConfig = client
        self.model = config.model or context.model
        self.sampling = {
            **context.sampling,
            **(config.sampling.model_dump(exclude_none=True) if config.sampling else {}),
        }

    def new_trace(self, task: Task) -> Trace:
        trace: Trace = Trace(
            task=TraceTask(type=type(task).__name__, data=task.data),
            # the seat as it ran: the run's sampling under the seat's own
            agent=AgentInfo(
                config=self.config.model_copy(
                    update={"sampling": SamplingConfig.model_validate(self.sampling)}
                ),
                name=self.name,
            ),
            state=state_cls(type(task))(),
        )
        if self.context.run is not None:
            trace.record_run(self.context.run)
        return trace

    def tools_for(self, task: Task) -> list[BoundTool]:
        toolsets = [*self.shared_toolsets, *type(task).toolsets(task.config)]
        for toolset in toolsets:
            if getattr(toolset.config, "url", None):
                raise HarnessError(
                    f"{type(toolset).__name__}: remote MCP toolsets (url) are not in this SDK yet"
                )
        return [tool for toolset in toolsets for tool in toolset.tools()]

    async def converse(
        self,
        task: Task,
        trace: Trace,
        messages: list[Message],
        tools: list[BoundTool],
        runtime: Runtime | None = None,
    ) -> list[Message]:
        stops = hooks_of(task, "stop")

        async def should_stop() -> bool:
            if not stops:
                return False
            for fn, hit in zip(
                stops, await call_all(stops, {"task": task.data, "trace": trace}), strict=True
            ):
                if hit:
                    trace.stop(fn.__name__)
                    return True
            return False

        async with open_client(
            self.endpoint, self.context.base_url, self.context.api_key
        ) as client:
            return await self.harness.chat(
                client,
                self.model,
                self.sampling,
                trace,
                messages,
                tools,
                RolloutLimits.of(self.config),
                should_stop,
                runtime,
            )

    @asynccontextmanager
    async def interaction(self, task: Task) -> AsyncIterator[Interaction]:
        """A rollout the caller drives turn by turn; it is finalized and scored on exit. A
        harness that runs commands gets its box (the ``subprocess`` runtime's sandbox) before
        the task's setup; the box is destroyed when the rollout ends, however it ends."""
        trace = self.new_trace(task)
        self.traces.append(trace)
        tools: list[BoundTool] = []
        runtime: Runtime | None = None
        started = False
        try:
            try:
                tools = self.tools_for(task)
                trace.timing.setup.start = time.time()
                limits = self.harness.sandbox_limits()
                if limits is None and scores_in_runtime(task):
                    limits = SandboxLimits()  # upstream gives every rollout its runtime
                if limits is not None:
                    runtime = await open_runtime(self.config.runtime, limits)
                    if trace.agent is not None:
                        trace.agent.runtime = runtime.info()
                    if isolation := getattr(runtime, "mode", None):
                        trace.info["runtime_isolation"] = isolation  # bwrap or landlock
                await task.setup(trace, runtime)
                trace.timing.setup.end = trace.timing.agent.start = time.time()
                started = True
            except Exception as e:
                trace.record_error(e if isinstance(e, RolloutError) else TaskError(f"setup: {e}"))
            interaction = Interaction(self, task, trace, tools, runtime)
            abandoned = False
            try:
                yield interaction
            except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
                abandoned = True  # nothing is scored; the box still goes (below)
                raise
            finally:
                if started and not abandoned:
                    trace.timing.agent.end = time.time()
                    trace.split_agent_time()
                    await self.wrap_up(task, trace, runtime)
        finally:
            if runtime is not None:
                await runtime.stop()

    async def wrap_up(self, task: Task, trace: Trace, runtime: Runtime | None = None) -> None:
        if not trace.errors:  # an interaction its caller closed (``run`` stops it first)
            trace.stop("user_closed")
        try:
            trace.timing.finalize.start = time.time()
            await task.finalize(trace, runtime)
            trace.timing.finalize.end = trace.timing.scoring.start = time.time()
            await task.score(trace, runtime)
            trace.timing.scoring.end = time.time()
        except Exception as e:
            trace.record_error(e if isinstance(e, RolloutError) else TaskError(str(e)))
        trace.ok = not trace.errors

    async def run(self, task: Task) -> Trace:
        """Play ``task`` from its prompt to the harness's last reply."""
        async with self.interaction(task) as interaction:
            if not interaction.trace.is_completed:
                await interaction.turn()
            if not interaction.trace.errors:
                interaction.trace.stop("agent_completed")
        return interaction.trace


class Agents:
    """An episode's agents, by role name (``agents.agent`` in the single-agent env)."""

    def __init__(self, agents: dict[str, Agent]) -> None:
        self._agents = agents

    def __getattr__(self, name: str) -> Agent:
        try:
            return self.__dict__["_agents"][name]
        except KeyError:
            raise AttributeError(
                f"no agent {name!r} in this env (roles: {sorted(self._agents)})"
            ) from None

    def __iter__(self) -> Any:
        return iter(self._agents.values())

    @property
    def traces(self) -> list[Trace]:
        return [trace for agent in self._agents.values() for trace in agent.traces]
