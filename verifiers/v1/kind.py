"""A v1 taskset package as one more kind of environment package for ``vf.load_environment``
(``verifiers.loading.loader.register_module_kind``; ``verifiers.v1`` registers it when it is
imported). Kept apart from ``eval_env``, which it imports only when it builds one: importing
``verifiers.v1`` stays light, and the taskset lookup below it does not import the wrapper."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from verifiers.errors import UsageError
from verifiers.loading.env_id import EnvId
from verifiers.v1.configs.agent import DEFAULT_MAX_TURNS
from verifiers.v1.taskset import Taskset


def environment_factory(parsed: EnvId, module: ModuleType) -> Any:
    """What ``vf.load_environment`` builds a v1 taskset package with (a loader kind,
    ``verifiers.loading.loader.register_module_kind``):
    ``factory(env=None, eval_taskset=None, default_max_turns=DEFAULT_MAX_TURNS)`` makes its
    ``TasksetEnvironment``, ``env`` the v1 ``[env]`` block, ``eval_taskset`` the taskset knobs
    of its held-out split and ``default_max_turns`` the cap of a seat that sets none (None: no
    cap, as upstream); None for a module exporting no ``Taskset``. A taskset that cannot be built (a harness this SDK lacks, a bad ``env``) is a
    ``UsageError`` naming the id."""
    names = getattr(module, "__all__", None) or []
    if not any(
        isinstance(obj := getattr(module, n, None), type) and issubclass(obj, Taskset)
        for n in names
    ):
        return None
    # the id the taskset's config names: the module found (an owner's ``owner__name`` module
    # when that is what the loader found), spelled as the id was when they are the same
    taskset_id = parsed.name if parsed.module_name == module.__name__ else module.__name__
    shown = f"{parsed.owner}/{parsed.name}" if parsed.owner else parsed.name

    def load_environment(
        env: dict[str, Any] | None = None,
        eval_taskset: dict[str, Any] | None = None,
        default_max_turns: int | None = DEFAULT_MAX_TURNS,
    ) -> Any:
        from verifiers.v1.eval_env import TasksetEnvironment

        try:
            built = TasksetEnvironment(
                taskset_id, env=env, eval_taskset=eval_taskset, default_max_turns=default_max_turns
            )
        except Exception as exc:
            raise UsageError(f"{shown}: {type(exc).__name__}: {exc}") from exc
        built.env_id = shown
        return built

    return load_environment
