"""Plugins by id: the taskset, env (and later harness) packages a config names, found and
imported, and their config types read off their generic parameters.

An id (``gsm8k-v1``, ``owner/gsm8k-v1@1.0``) names an installed package whose module
(``gsm8k_v1``) exports its plugin class in ``__all__``. Reading a config never installs
anything: when the package is not installed, its block is read loose (``WireTasksetConfig``,
``WireEnvConfig``, ``WireHarnessConfig``) and the plugin's own types check it when it is
loaded, which fails then, saying what to install. (Upstream installs hub ids while parsing.)
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from pydantic import BaseModel

from verifiers.v1.configs.env import EnvConfig, WireEnvConfig
from verifiers.v1.configs.harness import WireHarnessConfig
from verifiers.v1.configs.taskset import WireTasksetConfig
from verifiers.v1.env import Env, SingleAgentEnv
from verifiers.v1.generics import concrete_type
from verifiers.v1.utils.judges import judge_class as judge_class
from verifiers.v1.utils.judges import judge_config_type as judge_config_type
from verifiers.v1.utils.judges import load_judge as load_judge
from verifiers.v1.utils.plugin_fields import (
    PluginNotInstalled as PluginNotInstalled,
)
from verifiers.v1.utils.plugin_fields import (
    _loose as _loose,
)
from verifiers.v1.utils.plugin_fields import (
    harness_config_type as harness_config_type,
)
from verifiers.v1.utils.plugin_fields import (
    narrow_plugin_field as narrow_plugin_field,
)
from verifiers.v1.utils.plugin_fields import (
    prefixed_error as prefixed_error,
)
from verifiers.v1.utils.tasksets import (  # kept importable from here
    UPSTREAM_BUILTINS as UPSTREAM_BUILTINS,
)
from verifiers.v1.utils.tasksets import (
    import_environment as import_environment,
)
from verifiers.v1.utils.tasksets import (
    import_plugin as import_plugin,
)
from verifiers.v1.utils.tasksets import (
    import_taskset as import_taskset,
)
from verifiers.v1.utils.tasksets import (
    load_taskset as load_taskset,
)
from verifiers.v1.utils.tasksets import (
    module_name as module_name,
)
from verifiers.v1.utils.tasksets import (
    plugin_class as plugin_class,
)
from verifiers.v1.utils.tasksets import (
    task_type as task_type,
)
from verifiers.v1.utils.tasksets import (
    taskset_class as taskset_class,
)
from verifiers.v1.utils.tasksets import (
    taskset_config_type as taskset_config_type,
)

LOOSE_CONFIGS: dict[str, type[BaseModel]] = {
    "taskset": WireTasksetConfig,
    "harness": WireHarnessConfig,
}
"""What a plugin field is read as when its plugin is not installed here."""


def import_judge(judge_id: str) -> ModuleType:
    """The module of a judge plugin (a built-in's own module for ``reference``/``rubric``)."""
    import importlib

    return importlib.import_module(judge_class(judge_id).__module__)


def environment_class(taskset_id: str, env_id: str = "") -> type[Env[Any]]:
    """The env class of a run: the one ``env_id`` names, else the taskset package's own
    ``Env`` subclass, else ``SingleAgentEnv``."""
    if env_id:
        return plugin_class(import_environment(env_id), Env, "environment")
    if not taskset_id:
        return SingleAgentEnv
    module = import_taskset(taskset_id)
    try:
        return plugin_class(module, Env, "environment")
    except (TypeError, AttributeError):
        return SingleAgentEnv


def env_config_type(taskset_id: str, env_id: str = "") -> type[EnvConfig]:
    """The env class's config type (``Env[YourConfig]``): ``SingleAgentEnvConfig`` for a
    plain taskset."""
    return concrete_type(environment_class(taskset_id, env_id), EnvConfig, origin=Env) or EnvConfig


def resolve_env_config(data: dict[str, Any] | EnvConfig | None) -> EnvConfig:
    """``[env]`` data validated against the concrete env's config type (loose when its env
    or taskset plugin is not installed here)."""
    if isinstance(data, EnvConfig):
        data = data.model_dump()
    raw = dict(data or {})
    taskset = raw.get("taskset")
    taskset_id = taskset.get("id", "") if isinstance(taskset, dict) else ""
    cls = _loose(env_config_type, WireEnvConfig, taskset_id or "", raw.get("id") or "")
    return cls.model_validate(raw)


def load_environment(config: EnvConfig) -> Env:
    """The env of ``config``, built with its own config type (every entry point goes through
    here, so an env subclass loads everywhere)."""
    cls = environment_class(config.taskset.id, config.id)
    own = concrete_type(cls, EnvConfig, origin=Env) or EnvConfig
    if not isinstance(config, own):
        config = own.model_validate(config.model_dump())
    return cls(config)
