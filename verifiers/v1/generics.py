"""Reading a class's generic parameters back: which ``TaskData``/``TaskConfig``/``State`` a
``Task[...]`` (or a ``Taskset[...]``, an ``Env[...]``) was declared with, so the framework
builds the right types without the author repeating them."""

from __future__ import annotations

from typing import Any, TypeVar, get_args, get_origin

T = TypeVar("T")

_CACHED = 4096
_found: dict[tuple[type, type, type | None], Any] = {}


def concrete_type(cls: type, bound: type[T], *, origin: type | None = None) -> type[T] | None:
    """The first class argument that subclasses ``bound`` in the generic bases of ``cls``'s MRO
    (most derived first); with ``origin``, only bases parameterizing ``origin`` count. Read
    once per class (a class's generic bases are fixed when it is made): each rollout asks for
    its task's state class."""
    key = (cls, bound, origin)
    if key not in _found:
        if len(_found) >= _CACHED:  # classes made per call: stay bounded
            _found.clear()
        _found[key] = _concrete_type(cls, bound, origin)
    found: type[T] | None = _found[key]
    return found


def _concrete_type(cls: type, bound: type[T], origin: type | None) -> type[T] | None:
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            if origin is not None and get_origin(base) is not origin:
                continue
            for arg in get_args(base):
                if isinstance(arg, type) and issubclass(arg, bound):
                    return arg
    return None


def deep_merge(base: dict, override: dict) -> dict:
    """``override`` laid over ``base`` recursively. A nested dict that names another plugin
    (its ``id`` or ``type`` differs) replaces the old one whole, so the old plugin's knobs do
    not leak into the new one's validation."""
    merged = dict(base)
    for key, value in override.items():
        old = merged.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            switched = any(k in value and k in old and value[k] != old[k] for k in ("id", "type"))
            merged[key] = value if switched else deep_merge(old, value)
        else:
            merged[key] = value
    return merged
