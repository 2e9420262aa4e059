"""Decorators that mark environment and rubric methods for the engine to call.

Each marks a method with a priority (higher runs first, ties by name); ``Environment`` and
``Rubric`` collect the marked methods of their class once, so subclasses add behaviour without
overriding loop code.

========== ===================================================================================
stop       ``async def cond(self, state) -> bool``: the rollout ends when it is true
cleanup    ``async def f(self, state)``: after every rollout, even a failed one
teardown   ``async def f(self)``: once, when the environment shuts down
setup      ``async def f(self, state)``: after ``setup_state``, before the first turn
update     ``async def f(self, state)`` (``stage="rollout"``: after each rollout's last turn,
           before scoring) or ``async def f(self, states)`` (``stage="group"``: after a group
           is scored)
reward     a reward function (``weight=``; ``stage="group"`` for one that scores a group)
metric     a reward function with weight 0
advantage  ``async def f(self, states) -> list[float]``: a group's advantages, replacing
           reward minus the group mean
========== ===================================================================================

Both ``@vf.stop`` and ``@vf.stop(priority=1)`` work, as does the classic ``stop(func, 1)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
SignalStage = Literal["rollout", "group"]


def _marker(kind: str, doc: str, *, staged: bool = False, weighted: bool = False) -> Any:
    def decorator(
        func: F | None = None,
        priority: int = 0,
        stage: SignalStage = "rollout",
        weight: float | None = None,
        **_: Any,
    ) -> Any:
        if kind == "reward" and isinstance(priority, float) and weight is None:
            # ``reward(func, 0.5)``: the classic positional form is (func, weight, priority, stage)
            weight, priority = priority, 0

        def mark(f: F) -> F:
            setattr(f, kind, True)
            setattr(f, f"{kind}_priority", priority)
            if staged:
                setattr(f, f"{kind}_stage", "group" if kind == "advantage" else stage)
            if weighted:
                setattr(f, f"{kind}_weight", 1.0 if weight is None else float(weight))
            return f

        return mark(func) if func is not None else mark

    decorator.__name__ = decorator.__qualname__ = kind
    decorator.__doc__ = doc
    return decorator


stop = _marker("stop", "Mark ``async def cond(self, state) -> bool``: the rollout ends when true.")
cleanup = _marker(
    "cleanup", "Mark ``async def f(self, state)``: runs after every rollout.", staged=True
)
teardown = _marker("teardown", "Mark ``async def f(self)``: runs once at shutdown.")
setup = _marker("setup", "Mark ``async def f(self, state)``: runs before a rollout's first turn.")
update = _marker("update", "Mark a state update (``stage`` rollout or group).", staged=True)
metric = _marker("metric", "Mark a metric: a reward function with weight 0.", staged=True)
reward = _marker(
    "reward", "Mark a reward function (``weight=``, ``stage=``).", staged=True, weighted=True
)
advantage = _marker(
    "advantage",
    "Mark ``async def f(self, states) -> list[float]``: a group's advantages.",
    staged=True,
)


def collect(obj: object, kind: str) -> list[Callable[..., Any]]:
    """Bound methods of ``obj`` marked with ``kind``, highest priority first, then by name."""
    found = []
    for name in dir(type(obj)):
        attr = getattr(type(obj), name, None)
        if callable(attr) and getattr(attr, kind, False) is True:
            found.append((-getattr(attr, f"{kind}_priority", 0), name, getattr(obj, name)))
    return [method for _, _, method in sorted(found, key=lambda t: (t[0], t[1]))]


discover_decorated = collect  # the classic name
