"""A judge's config (an OpenAI-compatible endpoint, the model, sampling, an optional prompt
file) and the ``judges`` list a task config plugs judges in with (``--env.taskset.task.judges``).

Each ``judges`` entry names its plugin by ``id`` (``reference``, ``rubric``, or a package that
exports one ``Judge`` subclass) and is read as that judge's own config type; two entries may
share an id but never a reward key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, FiniteFloat, SerializeAsAny, ValidationError

from verifiers.v1.configs.client import BaseClientConfig
from verifiers.v1.types import ID, SamplingConfig


class JudgeConfig(BaseClientConfig):
    id: ID = ""
    """The judge plugin (empty for a judge that task code builds and calls itself)."""
    name: str = ""
    """The reward key a plugged judge records under (empty: the id's package name)."""
    weight: FiniteFloat = 1.0
    """The weight of a plugged judge's reward."""
    model: str = "openai/gpt-5.4-nano"
    """The judge model, as the endpoint names it."""
    sampling: SamplingConfig = SamplingConfig()
    prompt: Path | None = None
    """A file whose text replaces the judge's prompt template."""


Judges = list[SerializeAsAny[JudgeConfig]]
"""Plugged judges, each kept as (and dumped from) its own config type."""

_NEEDS_ID = (
    "each `judges` entry needs an `id` naming a judge plugin (`reference`, `rubric`, or a "
    "package exporting a Judge subclass)"
)


def judge_key(config: JudgeConfig) -> str:
    """The reward key of a plugged judge: its ``name``, else its id's package name."""
    if config.name:
        return config.name
    return config.id.split("@", 1)[0].rsplit("/", 1)[-1]


def resolve_judges(
    entries: Sequence[Any], config_type: Callable[[str], type[JudgeConfig]]
) -> list[JudgeConfig]:
    """Each entry read as the config type of the judge its ``id`` names."""
    resolved: list[JudgeConfig] = []
    for i, entry in enumerate(entries):
        raw = entry.model_dump() if isinstance(entry, BaseModel) else dict(entry)
        ident = raw.get("id")
        if not ident:
            raise ValueError(_NEEDS_ID)
        try:
            own = config_type(ident)
        except (ModuleNotFoundError, AttributeError, TypeError, ValueError) as e:
            raise ValueError(f"judges[{i}]: {e}") from None
        try:
            resolved.append(own.model_validate(raw))
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(map(str, err['loc'])) or '(entry)'}: {err['msg']}"
                for err in e.errors(include_url=False)
            )
            raise ValueError(f"judges[{i}] ({ident}): {problems}") from None
    return resolved


def check_judges(entries: Sequence[JudgeConfig]) -> None:
    """Every plugged judge names its plugin and records under its own reward key."""
    if any(not entry.id for entry in entries):
        raise ValueError(_NEEDS_ID)
    keys = [judge_key(entry) for entry in entries]
    shared = sorted({key for key in keys if keys.count(key) > 1})
    if shared:
        raise ValueError(
            f"`judges` entries share a reward key {shared}: give each a distinct `name` so "
            "every verdict is kept"
        )
