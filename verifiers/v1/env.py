"""An env: what one episode does with a taskset's task and the env's agents.

``Env[YourConfig]`` binds the env's config (its roles are ``AgentConfig`` fields); a plain
taskset runs in ``SingleAgentEnv`` (one seat, ``agent``). Running an episode needs agents,
harnesses and runtimes, which this SDK's v1 does not have yet: ``run`` says so.
"""

from __future__ import annotations

from typing import Any, Generic

from typing_extensions import TypeVar

from verifiers.v1.configs.env import EnvConfig, SingleAgentEnvConfig
from verifiers.v1.taskset import Taskset

EnvConfigT = TypeVar("EnvConfigT", bound=EnvConfig, default=EnvConfig)


class Env(Generic[EnvConfigT]):
    def __init__(self, config: EnvConfigT) -> None:
        self.config = config

    @property
    def taskset(self) -> Taskset:
        """The taskset the config names, built with its own config type."""
        from verifiers.v1.utils.tasksets import load_taskset

        return load_taskset(self.config.taskset)

    async def run(self, task: Any, agents: Any) -> None:
        """Play one episode of ``task`` with ``agents``."""
        raise NotImplementedError(
            f"{type(self).__name__}.run: v1 agents, harnesses and runtimes are not in this "
            "SDK yet (issue 41); a v1 taskset can be loaded, iterated and scored on a trace"
        )


class SingleAgentEnv(Env[SingleAgentEnvConfig]):
    """The env of a plain taskset: its one agent solves the task."""
