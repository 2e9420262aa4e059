"""An env: what one episode does with a taskset's task and the env's agents.

``Env[YourConfig]`` binds the env's config (its roles are ``AgentConfig`` fields); a plain
taskset runs in ``SingleAgentEnv`` (one seat, ``agent``, playing the task from its prompt).
``run_episode`` builds the agents, calls ``run`` and collects every agent's trace into an
``Episode``; an env overrides ``run`` to drive its agents (turn by turn with
``agent.interaction(task)``, for one).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cached_property
from typing import Any, Generic

from typing_extensions import TypeVar

from verifiers.v1.agent import Agent, Agents, ModelContext
from verifiers.v1.configs.env import EnvConfig, SingleAgentEnvConfig, agent_configs
from verifiers.v1.episode import EnvInfo, Episode
from verifiers.v1.task import Task
from verifiers.v1.taskset import Taskset
from verifiers.v1.trace_parts import Error, trace_task

EnvConfigT = TypeVar("EnvConfigT", bound=EnvConfig, default=EnvConfig)


class Env(Generic[EnvConfigT]):
    def __init__(self, config: EnvConfigT) -> None:
        self.config = config
        self._shared_toolsets: list[Any] | None = None
        """The taskset's toolsets while ``serving`` holds their servers (None outside)."""

    @cached_property
    def taskset(self) -> Taskset:
        """The taskset the config names, built with its own config type."""
        from verifiers.v1.utils.tasksets import load_taskset

        return load_taskset(self.config.taskset)

    def agents(self, context: ModelContext) -> Agents:
        """One agent per role of the config; a harness or runtime this SDK lacks fails here,
        naming it, before any model call."""
        shared = self._shared_toolsets
        if shared is None:  # outside ``serving``: a shared toolset is launched per rollout
            shared = type(self.taskset).toolsets(self.taskset.config)
        # each seat's config as its traces record it, made once for this env's episodes
        # (``Agent.recorded_config``; here, not in ``__init__``, which a subclass may replace)
        recorded = self.__dict__.setdefault("_recorded_configs", {})
        agents: dict[str, Agent] = {}
        for name, config in agent_configs(self.config).items():
            agent = agents[name] = Agent(name, config, context, shared)
            agent._recorded_configs = recorded
        return Agents(agents)

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[None]:
        """Hold the run's serving resources (upstream's ``Env.serving``): the taskset's
        toolsets built once, and each ``SharedToolsetConfig`` one served by a single server
        process for every episode run inside; stopped on exit."""
        toolsets = type(self.taskset).toolsets(self.taskset.config)
        if not toolsets:  # nothing to serve: ``serve_shared``'s empty list, without its import
            self._shared_toolsets = []
            try:
                yield
            finally:
                self._shared_toolsets = None
            return
        from verifiers.v1.mcp.client import serve_shared

        async with serve_shared(toolsets) as shared:
            self._shared_toolsets = shared
            try:
                yield
            finally:
                self._shared_toolsets = None

    async def setup(self, agents: Agents) -> None:
        """Before ``run`` sees this episode's agents (e.g. which seats train); once per episode."""

    async def run(self, task: Task, agents: Agents) -> None:
        """Play one episode of ``task`` with ``agents``."""
        raise NotImplementedError(f"{type(self).__name__} defines no `run`")

    async def finalize(self, task: Task, episode: Episode[Any, Any, Any]) -> None:
        """Judge the finished episode across its traces (``record_reward``/``record_metric``
        on each); a raise fails the episode."""

    def new_episode(self, task: Task) -> Episode[Any, Any, Any]:
        """An empty episode of ``task`` in this env (no traces yet, not ok)."""
        env_id = self.config.env_id
        info = self.__dict__.get("_env_info")
        if info is None or info.id != env_id:  # one record for the env's episodes (as
            info = self.__dict__["_env_info"] = EnvInfo(id=env_id)  # ``trace_task``'s)
        return Episode(env=info, task=trace_task(task))

    async def run_episode(self, task: Task, context: ModelContext) -> Episode[Any, Any, Any]:
        """One episode: ``setup``, ``run``, then ``finalize`` over every agent's trace; a hook
        that raises is the episode's own error (the traces finished so far stay on it), and
        ``finalize`` runs only after a clean ``run``, as upstream's ``run_episode``."""
        agents = self.agents(context)
        try:
            await self.setup(agents)
            await self.run(task, agents)
        except Exception as e:
            episode = self.new_episode(task)
            episode.errors.append(Error(type=type(e).__name__, message=str(e)))
        else:
            # made once ``run`` is done (nothing reads it before): not held across the
            # episode's model calls, where it was five more objects for the collector to walk
            episode = self.new_episode(task)
            episode.traces = agents.traces
            try:
                await self.finalize(task, episode)
            except Exception as e:
                episode.errors.append(Error(type=type(e).__name__, message=str(e)))
        episode.traces = agents.traces
        episode.ok = not episode.errors and all(t.ok for t in episode.traces)
        return episode


class SingleAgentEnv(Env[SingleAgentEnvConfig]):
    """The env of a plain taskset: its one agent solves the task."""

    async def run(self, task: Task, agents: Agents) -> None:
        await agents.agent.run(task)
