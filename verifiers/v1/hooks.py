"""The decorators that make a method a hook (``@reward``, ``@metric``, ``@stop``, ``@tool``),
finding a task's hooks, and calling each with the arguments it names.

A hook takes what it needs by parameter name (``task``, ``trace``, ``runtime``), as classic
reward functions do; hooks run in priority order (highest first, then by name), sync or async.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, overload

F = TypeVar("F", bound=Callable[..., Any])


def _tag(kind: str, **attrs: Any) -> Callable[[F], F]:
    def decorate(fn: F) -> F:
        setattr(fn, kind, True)
        for key, value in attrs.items():
            setattr(fn, key, value)
        return fn

    return decorate


@overload
def reward(func: F, weight: float = 1.0, priority: int = 0) -> F: ...
@overload
def reward(func: None = None, weight: float = 1.0, priority: int = 0) -> Callable[[F], F]: ...
def reward(func: F | None = None, weight: float = 1.0, priority: int = 0) -> Any:
    """A weighted reward of a task: returns a score, or a mapping of named scores."""
    decorate: Callable[[F], F] = _tag("reward", reward_priority=priority, _vf_weight=weight)
    return decorate if func is None else decorate(func)


@overload
def metric(func: F, priority: int = 0) -> F: ...
@overload
def metric(func: None = None, priority: int = 0) -> Callable[[F], F]: ...
def metric(func: F | None = None, priority: int = 0) -> Any:
    """A metric of a task (recorded, never summed into the reward): a value or a mapping."""
    decorate: Callable[[F], F] = _tag("metric", metric_priority=priority)
    return decorate if func is None else decorate(func)


@overload
def stop(func: F, priority: int = 0) -> F: ...
@overload
def stop(func: None = None, priority: int = 0) -> Callable[[F], F]: ...
def stop(func: F | None = None, priority: int = 0) -> Any:
    """A stop condition: true ends the rollout, under the method's name."""
    decorate: Callable[[F], F] = _tag("stop", stop_priority=priority)
    return decorate if func is None else decorate(func)


@overload
def tool(func: F, name: str | None = None) -> F: ...
@overload
def tool(func: None = None, name: str | None = None) -> Callable[[F], F]: ...
def tool(func: F | None = None, name: str | None = None) -> Any:
    """A toolset method offered to the model as a tool (its docstring is the description)."""
    decorate: Callable[[F], F] = _tag("tool", tool_name=name)
    return decorate if func is None else decorate(func)


_HOOK_CLASSES_CACHED = 4096
_hook_names: dict[tuple[type, str], tuple[str, ...]] = {}


def _tagged_names(cls: type, kind: str) -> tuple[str, ...]:
    """The names in ``cls``'s class dictionaries (its MRO) of callables tagged ``kind``, read
    once per class: walking every class dictionary for each hook kind of every rollout was a
    visible share of a v1 rollout's CPU. A class is complete when its first instance runs (a
    hook set on it later, after that, is not seen)."""
    key = (cls, kind)
    names = _hook_names.get(key)
    if names is None:
        if len(_hook_names) >= _HOOK_CLASSES_CACHED:  # classes made per call: stay bounded
            _hook_names.clear()
        names = _hook_names[key] = tuple(
            sorted(
                {
                    name
                    for klass in cls.__mro__
                    for name, value in vars(klass).items()
                    if callable(value) and hasattr(value, kind)
                }
            )
        )
    return names


def hooks_of(obj: object, kind: str) -> list[Callable[..., Any]]:
    """``obj``'s bound methods tagged ``kind``, highest priority first, then by name. Only
    the class dictionaries are read (a property is never evaluated), and an override without
    the decorator hides its base's hook."""
    bound: list[Callable[..., Any]] = []
    for name in _tagged_names(type(obj), kind):  # a loop: a comprehension's cells per call
        method = getattr(obj, name)
        if hasattr(method, kind):
            bound.append(method)
    if len(bound) > 1:  # one or none is in order (most tasks' kinds)
        bound.sort(key=_priority_order(kind))
    return bound


@functools.cache
def _priority_order(kind: str) -> Callable[[Any], tuple[int, str]]:
    """The sort key of ``kind``'s hooks: highest priority first, then by name."""
    attribute = f"{kind}_priority"
    return lambda method: (-getattr(method, attribute, 0), method.__name__)


_PARAMS_CACHED = 4096
_params: dict[tuple[Any, bool], frozenset[str]] = {}


def _param_names(fn: Callable[..., Any]) -> frozenset[str]:
    """``fn``'s parameter names, read once per function (a bound method's by its function:
    each rollout binds its hooks anew, and ``inspect.signature`` on every call of every hook
    was a visible share of a v1 rollout's CPU)."""
    func = getattr(fn, "__func__", None)
    key = (func, True) if func is not None else (fn, False)
    try:
        names = _params.get(key)
    except TypeError:  # an unhashable callable object
        return frozenset(inspect.signature(fn).parameters)
    if names is None:
        if len(_params) >= _PARAMS_CACHED:  # functions made per call: keep the cache bounded
            _params.clear()
        names = _params[key] = frozenset(inspect.signature(fn).parameters)
    return names


def call_by_name(fn: Callable[..., Any], available: dict[str, Any]) -> Any:
    """``fn`` called with the values of ``available`` its parameters name."""
    params = _param_names(fn)
    return fn(**{k: v for k, v in available.items() if k in params})


async def call_all(fns: list[Callable[..., Any]], available: dict[str, Any]) -> list[Any]:
    """Every ``fn`` called by name, concurrently; a coroutine's result is awaited. None or one
    hook (a task's ``setup``, its one reward...) is called in place: a task per hook, as
    ``gather`` makes, was most of the event loop's work in a v1 rollout."""

    async def one(fn: Callable[..., Any]) -> Any:
        result = call_by_name(fn, available)
        return await result if inspect.isawaitable(result) else result

    if len(fns) <= 1:
        return [await one(fn) for fn in fns]
    return list(await asyncio.gather(*(one(fn) for fn in fns)))


def seed(scores: dict[str, Any], names: Iterable[str]) -> None:
    """Each expected score set to None (not scored yet) before scoring, so a trace whose
    scoring failed half way still says which signals were due."""
    for name in names:
        scores[name] = None


def unseed(scores: dict[str, Any], name: str) -> None:
    """Drop a still-unscored seed (a hook that returned named scores records those names)."""
    if scores.get(name) is None:
        scores.pop(name, None)
