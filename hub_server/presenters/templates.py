"""The hub's Jinja2 templates (autoescaped; an undefined name is an error, not an empty string)."""

from __future__ import annotations

from pathlib import Path

import jinja2

templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
