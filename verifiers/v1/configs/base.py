"""The base of every v1 config: a pydantic model that refuses unknown keys (a misspelt knob
is an error, not a silent default) and reads its fields' docstrings as their descriptions.

Upstream builds these on its ``pydantic_config`` package (CLI parsing on top of pydantic);
this SDK's flags come from pydantic-settings (``verifiers/cli/settings.py``), so the configs
only need the model part, declared here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class BaseConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
