"""Reading a config's plugin blocks (``[taskset]``, ``[harness]``) against the plugin's own config
type, or loose when that plugin is not installed here: what the config models call while they
validate, below the plugins themselves (``tasksets``, ``loaders``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from verifiers.v1.configs.harness import (
    BashHarnessConfig,
    HarnessConfig,
    NullHarnessConfig,
    WireHarnessConfig,
)
from verifiers.v1.utils.plugins import PluginNotInstalled as PluginNotInstalled


def harness_config_type(harness_id: str) -> type[HarnessConfig]:
    """The ``null`` or ``bash`` harness's config; any other harness is not in this SDK, so its
    block is kept loose (and refused, by name, when an agent would run it)."""
    if harness_id == "bash":
        return BashHarnessConfig
    return NullHarnessConfig if harness_id == "null" else WireHarnessConfig


def _loose(kind_type: Callable[..., type[Any]], loose: type[Any], *args: str) -> type[Any]:
    try:
        return kind_type(*args)
    except PluginNotInstalled:
        return loose


def narrow_plugin_field(
    data: dict[str, Any],
    field: str,
    resolve: Callable[[str], type[BaseModel]],
    loose: type[BaseModel],
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
