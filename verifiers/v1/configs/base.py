"""The base of every v1 config: a pydantic model that refuses unknown keys (a misspelt knob
is an error, not a silent default) and reads its fields' docstrings as their descriptions.

Upstream builds these on its ``pydantic_config`` package (CLI parsing on top of pydantic);
this SDK's flags come from pydantic-settings (``verifiers/cli/settings.py``), so the configs
only need the model part, declared here.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator


class BaseConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    @model_validator(mode="before")
    @classmethod
    def _default_discriminator_types(cls, data: Any) -> Any:
        """A tagged-union field given as a dict without its ``type`` takes its default's tag,
        as upstream's ``pydantic_config`` does: ``client={"base_url": ...}`` is an eval client."""
        if not isinstance(data, dict):
            return data
        if not any(isinstance(value, dict) for value in data.values()):
            return data  # nothing to tag (a config made per rollout: skip the field walk)
        for name, field in cls.model_fields.items():
            value = data.get(name)
            if isinstance(value, dict) and "type" not in value:
                default = field.default
                if isinstance(default, BaseModel) and hasattr(default, "type"):
                    data = {**data, name: {**value, "type": default.type}}
        return data
