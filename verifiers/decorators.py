"""Lifecycle hooks for environment methods: stop conditions, per-rollout cleanup, teardown.

Each decorator marks a method with a priority (higher runs first). ``Environment`` collects the
marked methods of its class once, so subclasses add behaviour without overriding loop code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def _marker(kind: str) -> Callable[..., Any]:
    def decorator(func: F | None = None, *, priority: int = 0) -> Any:
        def mark(f: F) -> F:
            setattr(f, kind, True)
            setattr(f, f"{kind}_priority", priority)
            return f

        return mark(func) if func is not None else mark

    decorator.__name__ = kind
    return decorator


stop = _marker("stop")
"""``@vf.stop`` marks ``async def cond(self, state) -> bool``: the rollout ends when it is true."""

cleanup = _marker("cleanup")
"""``@vf.cleanup`` marks ``async def f(self, state)``: runs after every rollout, even a failed one."""

teardown = _marker("teardown")
"""``@vf.teardown`` marks ``async def f(self)``: runs once when the environment shuts down."""


def collect(obj: object, kind: str) -> list[Callable[..., Any]]:
    """Bound methods of ``obj`` marked with ``kind``, highest priority first, then by name."""
    found = []
    for name in dir(type(obj)):
        attr = getattr(type(obj), name, None)
        if callable(attr) and getattr(attr, kind, False) is True:
            found.append((-getattr(attr, f"{kind}_priority", 0), name, getattr(obj, name)))
    return [method for _, _, method in sorted(found, key=lambda t: (t[0], t[1]))]
