"""A rollout's live state: what a task, its tools and its harness share while it runs.

It rides on ``Trace.state`` and is never serialized with the trace (it may hold what cannot
cross a wire); a taskset subclasses ``State`` to add its own fields.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypeVar

from verifiers.v1.generics import concrete_type


class State(BaseModel):
    model_config = ConfigDict(ser_json_inf_nan="constants")

    artifacts: dict[str, bytes | None] = Field(default_factory=dict)


StateT = TypeVar("StateT", bound=State, default=State)


def state_cls(cls: type) -> type[State]:
    """The ``State`` subclass a generic class was parameterized with, else ``State``."""
    return concrete_type(cls, State) or State
