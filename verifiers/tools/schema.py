"""OpenAI tool schemas from Python functions, and argument validation with the same model.

Each parameter's type hint becomes JSON Schema through pydantic (so Optional, list/dict, Literal,
enums and pydantic models all work), descriptions come from Google- or NumPy-style docstrings,
and parameters without defaults are required. The pydantic model built for the schema also
validates the model's arguments before the function runs.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

_GOOGLE_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$", re.IGNORECASE)
_GOOGLE_ARG = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_SECTION_END = re.compile(
    r"^\s*(Returns?|Raises|Yields|Examples?|Notes?|See Also)\s*:?\s*$", re.IGNORECASE
)


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """(summary, {param: description}) from a Google- or NumPy-style docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    # the description is everything before the first section, line breaks and paragraphs kept
    # (as the classic SDK's schema builder keeps them)
    summary_lines: list[str] = []
    for i, line in enumerate(lines):
        numpy_header = i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"} and line.strip()
        if _GOOGLE_SECTION.match(line) or _SECTION_END.match(line) or numpy_header:
            break
        summary_lines.append(line.rstrip())
    while summary_lines and not summary_lines[-1]:
        summary_lines.pop()
    params: dict[str, str] = {}
    current: str | None = None
    mode: str | None = None
    for i, line in enumerate(lines):
        if _GOOGLE_SECTION.match(line):
            mode, current = "google", None
            continue
        if (
            line.strip() in ("Parameters", "Arguments")
            and i + 1 < len(lines)
            and set(lines[i + 1].strip()) == {"-"}
        ):
            mode, current = "numpy", None
            continue
        if mode is None:
            continue
        if _SECTION_END.match(line) or (
            mode == "numpy" and set(line.strip()) == {"-"} and current is None and params
        ):
            mode = None
            continue
        if mode == "numpy" and set(line.strip()) == {"-"}:
            continue
        if mode == "google":
            match = _GOOGLE_ARG.match(line)
            if match and (not line.startswith(" " * 8) or current is None):
                current = match.group(1).lstrip("*")
                params[current] = match.group(3).strip()
            elif current and line.strip():
                params[current] = (params[current] + "\n" + line.strip()).strip()
        else:
            header = re.match(r"^(\w+)\s*(?::\s*(.*))?$", line)
            if header and not line.startswith((" ", "\t")):
                current = header.group(1)
                params[current] = ""
            elif current and line.strip():
                params[current] = (params[current] + "\n" + line.strip()).strip()
    return "\n".join(summary_lines), params


@dataclass
class ToolSpec:
    """A callable tool: its schema for the model and the model that validates its arguments."""

    name: str
    func: Callable[..., Any]
    schema: dict[str, Any]
    arguments: type[BaseModel]
    is_async: bool
    hidden: tuple[str, ...] = ()

    def validate(self, args: dict[str, Any]) -> dict[str, Any]:
        """Validated keyword arguments, or ValueError with one line per problem."""
        try:
            model = self.arguments.model_validate(args)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ValueError(f"invalid arguments for {self.name}: {problems}") from None
        return {name: getattr(model, name) for name in type(model).model_fields}


def strict_schema(schema: Any) -> Any:
    """OpenAI's strict function-schema form, as the classic SDK sends it: every object lists all
    its properties as required and forbids others, and ``"default": null`` is dropped."""
    if isinstance(schema, list):
        return [strict_schema(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict_schema(v) for k, v in schema.items() if not (k == "default" and v is None)}
    if out.get("type") == "object" and isinstance(out.get("properties"), dict):
        if out.get("additionalProperties") is False:  # placed last, where the classic SDK has it
            del out["additionalProperties"]
        out.setdefault("additionalProperties", False)
        out["required"] = list(out["properties"])
    return out


def signature_fields(
    func: Callable[..., Any], descriptions: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The parameters a caller passes to ``func`` (not ``self``, ``*args`` or ``**kwargs``) as
    pydantic fields: the type hint (``Any`` where none), the default (required where none) and,
    from ``descriptions``, a description. Hints are resolved in ``func``'s module, so a tool
    defined under ``from __future__ import annotations`` gets its real types; both the classic
    ``tool_spec`` and ``verifiers.v1`` toolsets build their argument models from this."""
    try:
        hints = get_type_hints(func, include_extras=True)
    except (NameError, TypeError, AttributeError):  # forward references it cannot resolve
        hints = {}
    fields: dict[str, Any] = {}  # name: (type, default), as create_model takes them
    for param in inspect.signature(func).parameters.values():
        if param.name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, param.annotation)
        if annotation is inspect.Parameter.empty:
            annotation = Any
        default = ... if param.default is inspect.Parameter.empty else param.default
        # a description the annotation carries (Annotated[str, Field(description=...)]) stands
        description = (descriptions or {}).get(param.name)
        fields[param.name] = (
            annotation,
            Field(default, description=description) if description else default,
        )
    return fields


def tool_spec(func: Callable[..., Any], args_to_skip: list[str] | tuple[str, ...] = ()) -> ToolSpec:
    """Build the schema and validator of ``func``; ``args_to_skip`` are hidden from the model."""
    name = getattr(func, "__name__", None) or type(func).__name__
    summary, docs = parse_docstring(inspect.getdoc(func))
    full = signature_fields(func, docs)
    visible = {k: v for k, v in full.items() if k not in args_to_skip}
    config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")
    shown = create_model(f"{name}_args", __config__=config, **visible)
    validator = create_model(f"{name}_all_arguments", __config__=config, **full)
    parameters = strict_schema(shown.model_json_schema())
    parameters.setdefault("properties", {})
    parameters.setdefault("required", [])
    schema = {
        "type": "function",
        "function": {"name": name, "description": summary, "parameters": parameters},
    }
    is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(type(func).__call__)
    return ToolSpec(name, func, schema, validator, is_async, tuple(args_to_skip))
