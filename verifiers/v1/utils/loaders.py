"""Plugins by id: the taskset, env (and later harness) packages a config names, found and
imported, and their config types read off their generic parameters.

An id (``gsm8k-v1``, ``owner/gsm8k-v1@1.0``) names an installed package whose module
(``gsm8k_v1``) exports its plugin class in ``__all__``. Reading a config never installs
anything: when the package is not installed, its block is read loose (``WireTasksetConfig``,
``WireEnvConfig``, ``WireHarnessConfig``) and the plugin's own types check it when it is
loaded, which fails then, saying what to install. (Upstream installs hub ids while parsing.)
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from types import ModuleType
from typing import Any

from pydantic import BaseModel, ValidationError

from verifiers.errors import VFError
from verifiers.v1.configs.env import EnvConfig, WireEnvConfig
from verifiers.v1.configs.harness import HarnessConfig, WireHarnessConfig
from verifiers.v1.configs.taskset import TasksetConfig, WireTasksetConfig
from verifiers.v1.env import Env, SingleAgentEnv
from verifiers.v1.generics import concrete_type
from verifiers.v1.task import Task
from verifiers.v1.taskset import Taskset

LOOSE_CONFIGS: dict[str, type[BaseModel]] = {
    "taskset": WireTasksetConfig,
    "harness": WireHarnessConfig,
}
"""What a plugin field is read as when its plugin is not installed here."""


class PluginNotInstalled(VFError, ModuleNotFoundError):
    """The package an id names is not installed in this Python."""


UPSTREAM_BUILTINS = {
    "taskset": frozenset({"harbor", "lean", "nemo_gym", "openenv", "textarena"}),
    "environment": frozenset(
        {"agentic_judge", "best_of_n", "shared_agentic_judge", "single_agent", "user_sim"}
    ),
}
"""Plugins upstream 0.3 ships inside ``verifiers.v1`` and resolves before any installed module
of the same name (``textarena`` is its taskset, not the TextArena library); not in this SDK
yet, so their ids read loose and fail to load."""


def module_name(plugin_id: str) -> str:
    from verifiers.loading.env_id import EnvId

    return EnvId.parse(plugin_id).module_name


def import_plugin(plugin_id: str, kind: str) -> ModuleType:
    """The module of the package ``plugin_id`` names; ``PluginNotInstalled`` when absent
    (an error inside an installed plugin propagates as itself)."""
    name = module_name(plugin_id)
    if "/" not in plugin_id and name in UPSTREAM_BUILTINS.get(kind, ()):
        raise PluginNotInstalled(
            f"{kind} {plugin_id!r} is built into upstream verifiers 0.3 and not into this SDK "
            "yet (issue 41)",
            name=name,
        )
    if importlib.util.find_spec(name) is None:
        hint = "prime env install OWNER/NAME" if "/" in plugin_id else f"pip install -e PATH/{name}"
        raise PluginNotInstalled(
            f"{kind} {plugin_id!r} is not installed (no module {name!r}); a {kind} is a package "
            f"exporting its class in `__all__` — install it ({hint})",
            name=name,
        )
    return importlib.import_module(name)


def plugin_class(module: ModuleType, base: type, kind: str) -> Any:
    """The one subclass of ``base`` that ``module`` exports in ``__all__``."""
    names = getattr(module, "__all__", None)
    if names is None:
        raise AttributeError(f"{kind} module {module.__name__!r} defines no `__all__`")
    found = [
        obj
        for n in names
        if isinstance(obj := getattr(module, n, None), type)
        and issubclass(obj, base)
        and obj is not base
    ]
    if not found:
        raise TypeError(f"{kind} module {module.__name__!r} exports no {base.__name__} subclass")
    if len(found) > 1:
        raise ValueError(
            f"{kind} module {module.__name__!r} exports {len(found)} {base.__name__} "
            f"subclasses ({[c.__name__ for c in found]}); export exactly one"
        )
    return found[0]


def import_taskset(taskset_id: str) -> ModuleType:
    return import_plugin(taskset_id, "taskset")


def import_environment(env_id: str) -> ModuleType:
    return import_plugin(env_id, "environment")


def taskset_class(taskset_id: str) -> type[Taskset]:
    return plugin_class(import_taskset(taskset_id), Taskset, "taskset")


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


def task_type(taskset_id: str) -> type[Task]:
    return taskset_class(taskset_id).task_type()


def taskset_config_type(taskset_id: str) -> type[TasksetConfig]:
    return concrete_type(taskset_class(taskset_id), TasksetConfig, origin=Taskset) or TasksetConfig


def harness_config_type(harness_id: str) -> type[HarnessConfig]:
    """Harness plugins are not part of this SDK yet: a harness block is kept loose."""
    return WireHarnessConfig


def env_config_type(taskset_id: str, env_id: str = "") -> type[EnvConfig]:
    """The env class's config type (``Env[YourConfig]``): ``SingleAgentEnvConfig`` for a
    plain taskset."""
    return concrete_type(environment_class(taskset_id, env_id), EnvConfig, origin=Env) or EnvConfig


def _loose(kind_type: Callable[..., type[Any]], loose: type[Any], *args: str) -> type[Any]:
    try:
        return kind_type(*args)
    except PluginNotInstalled:
        return loose


def narrow_plugin_field(
    data: dict[str, Any],
    field: str,
    resolve: Callable[[str], type[BaseModel]],
    default_id: str | None = None,
) -> None:
    """Validate ``data[field]`` against the config type of the plugin its ``id`` names (in
    place; a block whose plugin is not installed is validated loose)."""
    raw = data.get(field)
    if isinstance(raw, BaseModel):
        raw = raw.model_dump()
    raw = dict(raw or {})
    ident = raw.get("id") or default_id
    if not ident:
        return
    if not isinstance(ident, str):
        raise ValueError(f"{field}.id needs an id (got {ident!r})")
    loose = LOOSE_CONFIGS[field]
    try:
        data[field] = _loose(resolve, loose, ident).model_validate({**raw, "id": ident})
    except ValidationError as e:
        raise prefixed_error(e, (field,)) from None


def prefixed_error(error: ValidationError, prefix: tuple[str | int, ...]) -> ValidationError:
    """``error`` with ``prefix`` before each location (a block validated inside its owner's
    validator would otherwise lose the segment the user typed)."""
    return ValidationError.from_exception_data(
        error.title,
        [{**e, "loc": prefix + tuple(e["loc"])} for e in error.errors(include_url=False)],  # type: ignore[typeddict-unknown-key]  # ErrorDetails rows are valid InitErrorDetails
    )


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


def load_taskset(config: TasksetConfig) -> Taskset:
    """The taskset ``config`` names, built with its own config type."""
    cls = taskset_class(config.id)
    own = concrete_type(cls, TasksetConfig, origin=Taskset) or TasksetConfig
    if not isinstance(config, own):
        config = own.model_validate(config.model_dump())
    return cls(config)


def load_environment(config: EnvConfig) -> Env:
    """The env of ``config``, built with its own config type (every entry point goes through
    here, so an env subclass loads everywhere)."""
    cls = environment_class(config.taskset.id, config.id)
    own = concrete_type(cls, EnvConfig, origin=Env) or EnvConfig
    if not isinstance(config, own):
        config = own.model_validate(config.model_dump())
    return cls(config)
