"""An env's config, the run's ``[env]`` block: the seed taskset, one ``AgentConfig`` field
per role (a field whose default is an ``AgentConfig`` instance is a role), env-level knobs.

A run's ``env`` narrows to the concrete env class's config by the env id, else the taskset
id (``verifiers/v1/utils/loaders.py``); when that plugin is not installed here the block is
read as ``WireEnvConfig``, which keeps unknown roles and knobs until the env is loaded.
"""

from __future__ import annotations

import functools
from typing import Any, get_args

from pydantic import ConfigDict, Field, SerializeAsAny, model_validator

from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.configs.base import BaseConfig
from verifiers.v1.configs.retries import RetryConfig
from verifiers.v1.configs.taskset import TasksetConfig, WireTasksetConfig
from verifiers.v1.generics import deep_merge
from verifiers.v1.types import ID


class EnvTimeoutConfig(BaseConfig):
    """Seconds the env's own episode and finalize hooks may take (None: no limit)."""

    episode: float | None = None
    finalize: float | None = None


def _names_agent_config(annotation: Any) -> bool:
    if isinstance(annotation, type):
        return issubclass(annotation, AgentConfig)
    return any(_names_agent_config(arg) for arg in get_args(annotation))


class EnvConfig(BaseConfig):
    id: ID = ""
    """The env plugin (empty: the taskset's own env, else the single-agent env)."""
    taskset: SerializeAsAny[TasksetConfig] = TasksetConfig()
    """The taskset every episode starts from."""
    timeout: EnvTimeoutConfig = EnvTimeoutConfig()
    retries: RetryConfig = RetryConfig()
    """Whole-episode retries."""
    max_concurrent_agents: int | None = Field(1, ge=1)
    """Agent runs of one episode active at once (None: no limit)."""

    @property
    def env_id(self) -> str:
        """The run's name: ``env+taskset`` when both are named, else whichever is."""
        if self.taskset.id and self.id:
            return f"{self.id}+{self.taskset.id}"
        return self.taskset.id or self.id

    @model_validator(mode="before")
    @classmethod
    def _refuse_env_level_harness(cls, data: Any) -> Any:
        if isinstance(data, dict) and "harness" in data and "harness" not in cls.model_fields:
            raise ValueError(
                "a harness belongs to a seat: --env.agent.harness.* on the single-agent env, "
                "--env.<role>.harness.* on a multi-agent role (TOML: [env.agent.harness])"
            )
        return data

    @model_validator(mode="before")
    @classmethod
    def _narrow_taskset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("taskset") is not None:
            from verifiers.v1.utils.plugin_fields import narrow_plugin_field
            from verifiers.v1.utils.tasksets import taskset_config_type

            narrow_plugin_field(data, "taskset", taskset_config_type, WireTasksetConfig)
        return data

    @model_validator(mode="before")
    @classmethod
    def _merge_role_defaults(cls, data: Any) -> Any:
        """A role given in part keeps the rest of its declared default (plain validation
        would replace the whole instance)."""
        if isinstance(data, dict):
            for name, info in cls.model_fields.items():
                if isinstance(info.default, AgentConfig) and isinstance(data.get(name), dict):
                    default = info.default.model_dump(exclude_none=True)
                    data[name] = deep_merge(default, data[name])
        return data

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """A role is declared with a default instance and never shadows a base field."""
        super().__pydantic_init_subclass__(**kwargs)
        for name, info in cls.model_fields.items():
            is_role = isinstance(info.default, AgentConfig)
            if not is_role and not _names_agent_config(info.annotation):
                continue
            if is_role and name in EnvConfig.model_fields:
                raise TypeError(f"{cls.__name__}.{name}: a role cannot shadow EnvConfig.{name}")
            if not is_role:
                raise TypeError(
                    f"{cls.__name__}.{name}: declare a role with a default instance "
                    f"(`{name}: vf.AgentConfig = vf.AgentConfig()`)"
                )


def agent_configs(config: EnvConfig) -> dict[str, AgentConfig]:
    """The env's roles, by field name, in declaration order."""
    return {name: getattr(config, name) for name in _role_names(type(config))}


@functools.lru_cache(maxsize=1024)
def _role_names(cls: type[EnvConfig]) -> tuple[str, ...]:
    """The role fields of an env config class, read once per class (its fields are fixed
    when it is made; an env's every episode asks)."""
    return tuple(
        name for name, info in cls.model_fields.items() if isinstance(info.default, AgentConfig)
    )


class SingleAgentEnvConfig(EnvConfig):
    """The env of a plain taskset: one seat, ``agent``."""

    agent: AgentConfig = AgentConfig()


class WireEnvConfig(EnvConfig):
    """An ``[env]`` block read without its env or taskset plugin installed: roles and knobs
    it does not know are kept as extras, checked when the env is loaded."""

    model_config = ConfigDict(extra="allow")
