"""Plugins by id, below every config: the module an id names (``gsm8k-v1`` -> ``gsm8k_v1``),
imported, and the one class of a kind it exports in ``__all__`` (tasksets, envs, judges)."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType
from typing import Any

from verifiers.errors import VFError


class PluginNotInstalled(VFError, ModuleNotFoundError):
    """The package an id names is not installed in this Python."""


UPSTREAM_BUILTINS = {
    "taskset": frozenset({"harbor", "lean", "nemo_gym", "openenv", "textarena"}),
    "environment": frozenset(
        {"agentic_judge", "best_of_n", "shared_agentic_judge", "single_agent", "user_sim"}
    ),
}
"""Plugins upstream 0.3 ships inside ``verifiers.v1`` and resolves before any installed module
of the same name (``textarena`` is its taskset, not the TextArena library); those not in
``BUILT_IN`` are not in this SDK, so their ids read loose and fail to load."""

BUILT_IN = {
    "environment": {
        "single_agent": "verifiers.v1.envs.single_agent",
        "user_sim": "verifiers.v1.envs.user_sim",
    }
}
"""The built-in plugins this SDK has: their modules, by kind and module name."""


def module_name(plugin_id: str) -> str:
    from verifiers.loading.env_id import EnvId

    return EnvId.parse(plugin_id).module_name


def import_plugin(plugin_id: str, kind: str) -> ModuleType:
    """The module of the package ``plugin_id`` names; ``PluginNotInstalled`` when absent
    (an error inside an installed plugin propagates as itself)."""
    name = module_name(plugin_id)
    if "/" not in plugin_id and name in BUILT_IN.get(kind, {}):
        return importlib.import_module(BUILT_IN[kind][name])
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


