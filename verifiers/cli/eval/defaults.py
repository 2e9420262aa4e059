"""An environment's ``[tool.verifiers.eval]`` table: vf-eval's defaults for it, typed and strict.

The table ships in the environment's wheel (``extra_metadata/pyproject.toml``); a key vf-eval does
not know (``num_example``) or a value of the wrong type is an error that names it, not a default
silently ignored. The built-in defaults are this model's field defaults, declared once.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, distribution

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from verifiers.cli.endpoints import CLIError


class EvalDefaults(BaseModel):
    """What ``[tool.verifiers.eval]`` may set; flags given on the command line win."""

    model_config = ConfigDict(extra="forbid", strict=True)

    num_examples: int = Field(5, ge=-1, description="examples to evaluate (-1: all)")
    rollouts_per_example: int = Field(3, ge=1, description="rollouts per example")
    max_concurrent: int = Field(32, ge=1, description="rollouts in flight at once")
    max_tokens: int | None = Field(None, ge=1, description="completion token limit")
    temperature: float | None = Field(None, ge=0, description="sampling temperature")


def eval_defaults(dist_name: str | None) -> EvalDefaults:
    """The environment's table (or the built-in defaults when it ships none)."""
    text = _shipped_pyproject(dist_name)
    if not text:
        return EvalDefaults()
    try:
        table = tomllib.loads(text).get("tool", {}).get("verifiers", {}).get("eval", {})
    except tomllib.TOMLDecodeError as exc:
        raise CLIError(f"{dist_name}'s shipped pyproject.toml is not valid TOML: {exc}") from exc
    if isinstance(table.get("temperature"), int):  # TOML's 1 for 1.0
        table["temperature"] = float(table["temperature"])
    try:
        return EvalDefaults.model_validate(table)
    except ValidationError as exc:
        problems = "; ".join(_describe(error) for error in exc.errors())
        known = ", ".join(EvalDefaults.model_fields)
        raise CLIError(
            f"{dist_name}'s [tool.verifiers.eval] table: {problems} (the keys it may set: {known})"
        ) from exc


def _describe(error: ErrorDetails) -> str:
    key = ".".join(str(part) for part in error["loc"]) or "table"
    if error["type"] == "extra_forbidden":
        return f"unknown key {key!r}"
    return f"{key}: {error['msg']} (got {error['input']!r})"


def _shipped_pyproject(dist_name: str | None) -> str | None:
    if not dist_name:
        return None
    try:
        return distribution(dist_name).read_text("extra_metadata/pyproject.toml")
    except PackageNotFoundError:
        return None
