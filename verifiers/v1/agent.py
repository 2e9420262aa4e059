"""An agent: a seat of an env (``AgentConfig``) bound to a model endpoint and a harness.

``agent.run(task)`` plays one task from its prompt: a trace is opened, the task sets up, the
harness converses until it is done, the task finalizes and scores. ``agent.interaction(task)``
does the same across several ``turn()``s, for an env that speaks between them (a scripted
user). Whatever fails inside (the model call, the harness, a hook) is recorded on the trace
as an error; the run goes on to the next task.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from verifiers.sandbox import SandboxLimits
from verifiers.v1.chat import model_client, pooled_client
from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.configs.client import BaseClientConfig, EvalClientConfig
from verifiers.v1.errors import RolloutError, TaskError
from verifiers.v1.harnesses import harness_for
from verifiers.v1.hooks import call_all, hooks_of
from verifiers.v1.interaction import Interaction, Segment, prompt_messages
from verifiers.v1.runtimes.base import Runtime, check_runtime
from verifiers.v1.runtimes.start import open_runtime
from verifiers.v1.session import RolloutLimits
from verifiers.v1.state import state_cls
from verifiers.v1.task import Task, scores_in_runtime
from verifiers.v1.toolset import BoundTool
from verifiers.v1.trace import Trace
from verifiers.v1.trace_parts import AgentInfo, RunInfo, trace_task
from verifiers.v1.types import Message, SamplingConfig

__all__ = ["Agent", "Agents", "Interaction", "ModelContext", "Segment", "make_agent"]
__all__ += ["prompt_messages"]  # eval_env's import, from before ``interaction`` was split off


@dataclass
class ModelContext:
    """The run's model: the endpoint and model name an agent falls back to, and sampling."""

    base_url: str | None = None
    model: str = ""
    api_key: str | None = None
    """The key for ``base_url`` (an agent's own client config reads its ``api_key_var``)."""
    headers: dict[str, str] = field(default_factory=dict)
    sampling: dict[str, Any] | SamplingConfig = field(default_factory=dict)
    """Sampling settings (a ``SamplingConfig`` as upstream passes one, kept as its set fields)."""
    run: RunInfo | None = None
    client: BaseClientConfig | None = None
    """The endpoint config an agent without its own uses (upstream's field; None: ``base_url``)."""

    def __post_init__(self) -> None:
        if isinstance(self.sampling, SamplingConfig):
            self.sampling = self.sampling.model_dump(exclude_none=True)


_DEFAULT_ENDPOINT = EvalClientConfig()  # a seat's that names none (only read): one for all
_RECORDED_CONFIGS_CACHED = 256


def _overrides(task: Task, hook: str) -> bool:  # ``Task``'s own ``hook`` does nothing
    return getattr(type(task), hook, None) is not getattr(Task, hook)


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
        self.trainable = True
        """Whether its traces train the run's policy (an env's ``setup`` may say no)."""
        self.traces: list[Trace] = []
        harness = config.harness
        self.harness = harness_for(harness.id if harness is not None else "null")(harness)
        check_runtime(config.runtime)
        client = config.client or context.client or _DEFAULT_ENDPOINT
        self.endpoint: BaseClientConfig = client
        self.model = config.model or context.model
        self.sampling: dict[str, Any] = {
            **context.sampling,  # type: ignore[dict-item]  # a dict after __post_init__
            **(config.sampling.model_dump(exclude_none=True) if config.sampling else {}),
        }
        # the seat's config as its traces record it, by config and sampling (an env shares
        # one such cache among the agents of its episodes: ``Env.agents``)
        self._recorded_configs: dict[tuple[int, str], tuple[AgentConfig, AgentConfig]] = {}

    def new_trace(self, task: Task) -> Trace:
        trace: Trace = Trace(
            task=trace_task(task),
            agent=AgentInfo(
                config=self.recorded_config(), name=self.name, trainable=self.trainable
            ),
            state=state_cls(type(task))(),
        )
        if self.context.run is not None:
            trace.record_run(self.context.run)
        return trace

    def recorded_config(self) -> AgentConfig:
        """The seat as it ran, what its traces record: the run's sampling under the seat's
        own. Made once per config and sampling and shared by the traces that ran so (a copy
        and a validation per trace were a visible share of a v1 rollout's CPU and objects)."""
        key = (id(self.config), repr(self.sampling))
        cached = self._recorded_configs.get(key)
        if cached is not None and cached[0] is self.config:  # the entry keeps its id unique
            return cached[1]
        if len(self._recorded_configs) >= _RECORDED_CONFIGS_CACHED:  # sampling set per call
            self._recorded_configs.clear()
        recorded = self.config.model_copy(
            update={"sampling": SamplingConfig.model_validate(self.sampling)}
        )
        self._recorded_configs[key] = (self.config, recorded)
        return recorded

    async def open_tools(self, task: Task, stack: AsyncExitStack) -> list[BoundTool]:
        """The rollout's tools: the taskset's shared toolsets, then the task's; an MCP server
        launched or connected for them closes with ``stack``."""
        toolsets = [*self.shared_toolsets, *type(task).toolsets(task.config)]
        return await _open_toolsets(toolsets, stack)

    async def converse(
        self,
        task: Task,
        trace: Trace,
        messages: list[Message],
        tools: list[BoundTool],
        runtime: Runtime | None = None,
    ) -> list[Message]:
        stops = hooks_of(task, "stop")
        should_stop = (
            functools.partial(_stop_hit, stops, task, trace) if stops else _never_stops
        )  # no closure (its cells) per rollout: a task without stop hooks shares one
        limits = _limits(
            self.config.max_turns,
            self.config.max_input_tokens,
            self.config.max_output_tokens,
            self.config.max_total_tokens,
        )
        args = (self.model, self.sampling, trace, messages, tools, limits, should_stop, runtime)
        pooled = pooled_client(self.endpoint, self.context.base_url, self.context.api_key)
        if pooled is not None:  # the run's shared client: nothing to open or close per call
            return await self.harness.chat(pooled, *args)
        async with model_client(
            self.endpoint, self.context.base_url, self.context.api_key
        ) as client:
            return await self.harness.chat(client, *args)

    @asynccontextmanager
    async def interaction(self, task: Task) -> AsyncIterator[Interaction]:
        """A rollout the caller drives turn by turn; it is finalized and scored on exit. A
        harness that runs commands gets its box (the ``subprocess`` runtime's sandbox) before
        the task's setup; the box is destroyed when the rollout ends, however it ends."""
        interaction = await self.open_interaction(task)
        abandoned = False
        try:
            yield interaction
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            abandoned = True  # nothing is scored; the box still goes (``release_interaction``)
            raise
        finally:
            await self.release_interaction(interaction, abandoned)

    async def open_interaction(self, task: Task) -> Interaction:
        """``interaction``'s opening: the trace, the tools, the box, the task's setup (a
        failure there is the trace's error). Released by ``release_interaction``, however it ends."""
        trace = self.new_trace(task)
        self.traces.append(trace)
        tools: list[BoundTool] = []
        runtime: Runtime | None = None
        started = False
        # the rollout's MCP sessions and launched tool servers; none for tools all in process
        # (a stack held across every model call of a rollout was two more objects for the
        # collector to walk)
        servers: AsyncExitStack | None = None
        try:
            try:
                toolsets = [*self.shared_toolsets, *type(task).toolsets(task.config)]
                if not _in_process(toolsets):
                    servers = AsyncExitStack()
                tools = await _open_toolsets(toolsets, servers)
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
                # by parameter name, as upstream's ``invoke``: ``setup(self, runtime)`` is valid
                if _overrides(task, "setup"):  # the base hook does nothing: not called
                    await call_all([task.setup], {"trace": trace, "runtime": runtime})
                trace.timing.setup.end = trace.timing.agent.start = time.time()
                started = True
            except Exception as e:
                trace.record_error(e if isinstance(e, RolloutError) else TaskError(f"setup: {e}"))
            interaction = Interaction(self, task, trace, tools, runtime)
        except BaseException:
            await _close_servers(servers, runtime)
            raise
        interaction._ready, interaction._servers = started, servers
        return interaction

    async def finish_interaction(self, interaction: Interaction) -> None:
        """A set-up rollout's end (``Interaction.close``): the agent's time, then finalize
        and score (``wrap_up``)."""
        trace = interaction.trace
        trace.timing.agent.end = time.time()
        trace.split_agent_time()
        await self.wrap_up(interaction.task, trace, interaction.runtime)

    async def release_interaction(self, interaction: Interaction, abandoned: bool = False) -> None:
        """``interaction``'s end: closed (scored) unless ``abandoned`` (cancelled, nothing is
        scored), then its tool servers and box go, however the close ends."""
        try:
            if not abandoned:
                await interaction.close()
        finally:
            await _close_servers(interaction._servers, interaction.runtime)

    async def wrap_up(self, task: Task, trace: Trace, runtime: Runtime | None = None) -> None:
        if not trace.errors:  # an interaction its caller closed (``run`` stops it first)
            trace.stop("user_closed")
        try:
            trace.timing.finalize.start = time.time()
            if _overrides(task, "finalize"):
                await call_all([task.finalize], {"trace": trace, "runtime": runtime})
            trace.timing.finalize.end = trace.timing.scoring.start = time.time()
            await task.score(trace, runtime)
            trace.timing.scoring.end = time.time()
        except Exception as e:
            trace.record_error(e if isinstance(e, RolloutError) else TaskError(str(e)))
        trace.ok = not trace.errors

    async def run(self, task: Task) -> Trace:
        """Play ``task`` from its prompt to the harness's last reply: ``interaction``'s
        open, one segment and release, without an async context manager per rollout."""
        interaction = await self.open_interaction(task)
        abandoned = False
        try:
            await interaction._segment([])  # the prompt, or a prompt-less task's system text
            if not interaction.trace.errors:
                interaction.trace.stop("agent_completed")
        except (asyncio.CancelledError, KeyboardInterrupt, SystemExit):
            abandoned = True
            raise
        finally:
            await self.release_interaction(interaction, abandoned)
        return interaction.trace


async def _never_stops() -> bool:
    return False


async def _stop_hit(stops: list[Any], task: Task, trace: Trace) -> bool:
    """Whether a stop hook of ``task`` fires (the first that does stops ``trace``)."""
    for fn, hit in zip(
        stops, await call_all(stops, {"task": task.data, "trace": trace}), strict=True
    ):
        if hit:
            trace.stop(fn.__name__)
            return True
    return False


@functools.lru_cache(maxsize=256)
def _limits(*caps: int | None) -> RolloutLimits:
    """``RolloutLimits.of`` a config with these caps, one record per distinct caps (frozen)."""
    return RolloutLimits(*caps)


def _in_process(toolsets: list[Any]) -> bool:
    """Whether every toolset runs in the rollout's process (none, or all colocated without
    a URL): opened without the MCP client or an exit stack."""
    return all(getattr(t.config, "colocated", False) and not t.config.url for t in toolsets)


async def _open_toolsets(toolsets: list[Any], stack: AsyncExitStack | None) -> list[BoundTool]:
    """``toolsets``' tools; an MCP server launched or connected for them closes with
    ``stack`` (which only toolsets all in process may go without)."""
    if _in_process(toolsets):
        tools: list[BoundTool] = []  # ``open_tools``'s colocated branch, without importing
        for toolset in toolsets:  # the MCP client for it
            await toolset.setup()
            tools.extend(toolset.tools())
        return tools
    from verifiers.v1.mcp.client import open_tools

    assert stack is not None, "a rollout with tool servers has an exit stack for them"
    return await open_tools(toolsets, stack)


async def _close_servers(servers: AsyncExitStack | None, runtime: Runtime | None) -> None:
    try:
        if servers is not None:
            await servers.aclose()
    finally:
        if runtime is not None:
            await runtime.stop()


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


def make_agent(config: AgentConfig) -> Agent:
    """A standalone agent from its config alone (upstream's ``vf.make_agent``): the config
    pins the model, and its client the endpoint (None: ``OPENAI_BASE_URL``)."""
    if config.model is None:
        raise ValueError(
            "AgentConfig.model is unset; a standalone agent needs a pinned model (inside an env "
            "the run's own model fills it in)"
        )
    return Agent("agent", config, ModelContext(model=config.model))
