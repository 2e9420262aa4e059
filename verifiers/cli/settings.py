"""A command's settings model made into its command line: flags, ``--help`` and environment.

Every CLI declares its settings once, as a pydantic model: a field's type, default and
``description`` are its flag's type, default and help. ``Annotated[..., Flag(...)]`` adds only
what a command line needs beyond that: short names, a metavar, a positional argument (a list
field: one or more), a group of flags of which one may be given, a flag taken but not shown,
and the environment variable the setting falls back to. :func:`build_parser` makes the argparse
parser (vf-eval, vf-serve, vf-init, vf-install, vf-data, vf-report, vf-env-server),
:func:`add_settings` a subcommand's (``prime``'s, hub_client.settings), and
:func:`parse_settings` / :func:`validate_settings` the validated settings, reading each environment variable where its field declares it; what the parser
refuses is a ``UsageError`` (``verifiers.cli.usage`` says it, exit 2). :func:`settings_help`
walks a nested config model (vf-rl, vf-sft: ``@ file.toml`` plus ``--dotted.key value``) into one
line per key.

Plain pydantic rather than pydantic-settings: the commands keep their argparse flags exactly
(short names, repeatable flags, positionals, ``@ file.toml``), and an environment variable is a
field's fallback, which is all these commands need.
"""

from __future__ import annotations

import argparse
import json
import os
import textwrap
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, Self, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError
from pydantic.fields import FieldInfo

from verifiers.errors import UsageError


class Flag:
    """How a settings field appears on the command line (beyond its name, type and help)."""

    def __init__(
        self,
        *aliases: str,
        env: str | None = None,
        metavar: str | None = None,
        positional: bool = False,
        command_line: bool = True,
        exclusive: str | None = None,
        hidden: bool = False,
    ) -> None:
        self.aliases = aliases  # short names, e.g. "-n"; the long one is --field-name
        self.env = env  # the environment variable read when the flag is not given
        self.metavar = metavar
        self.positional = positional
        self.command_line = command_line  # False: environment only (a secret never in argv)
        self.exclusive = exclusive  # flags naming one group: at most one of them may be given
        self.hidden = hidden  # taken but not in --help (kept for scripts, no longer advertised)


class CommandSettings(BaseModel):
    """A command's settings: strict, and aware of which were given on its command line."""

    model_config = ConfigDict(extra="forbid")

    _given: frozenset[str] = PrivateAttr(default_factory=frozenset)

    def given(self, name: str) -> bool:
        """Whether ``name`` was given on the command line (not a default, not the environment)."""
        return name in self._given

    def with_values(self, values: Mapping[str, Any]) -> Self:
        """These settings with ``values`` in place of what the command line left to defaults
        (a resumed run's recorded settings), validated as a command line's would be; ``given``
        still answers for the command line alone."""
        settings = self.model_validate({**self.model_dump(), **values})
        settings._given = self._given
        return settings


Settings = TypeVar("Settings", bound=CommandSettings)


def flag_of(field: FieldInfo) -> Flag:
    return next((m for m in field.metadata if isinstance(m, Flag)), Flag())


def long_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


MAINTAINER_NOTE = "Over 400 lines, not split:"
"""How a module docstring's note to maintainers starts (CONTRIBUTING's rule for long modules)."""


def for_users(doc: str | None) -> str | None:
    """A command module's docstring as its ``--help`` shows it: without the paragraph that
    tells maintainers why the module is long."""
    if not doc:
        return doc
    paragraphs = doc.strip().split("\n\n")
    return "\n\n".join(p for p in paragraphs if not p.lstrip().startswith(MAINTAINER_NOTE))


def build_parser(
    model: type[CommandSettings], prog: str, description: str | None = None
) -> argparse.ArgumentParser:
    """The argparse parser of ``model`` (see :func:`add_settings`)."""
    parser = _Parser(prog=prog, description=for_users(description), formatter_class=_Help)
    add_settings(parser, model)
    return parser


def add_settings(parser: argparse.ArgumentParser, model: type[CommandSettings]) -> None:
    """One argument of ``parser`` per field of ``model``, its help from the field; the settings
    read only from the environment are listed after the flags. ``parser`` may be a subcommand's
    (``prime env push``): :func:`validate_settings` makes the model from what it parsed."""
    groups: dict[str, argparse._MutuallyExclusiveGroup] = {}
    environment = []
    for name, field in model.model_fields.items():
        flag = flag_of(field)
        if not flag.command_line:
            environment.append(f"  ${flag.env}  {field.description or ''}")
            continue
        names = [name] if flag.positional else [*flag.aliases, long_flag(name)]
        kwargs: dict[str, Any] = {"help": help_text(field).replace("%", "%%")}
        if flag.hidden:
            kwargs["help"] = argparse.SUPPRESS
        if not flag.positional:
            kwargs["dest"] = name
        if flag.metavar:
            kwargs["metavar"] = flag.metavar
        if field.is_required():
            kwargs["default"] = None
            if not flag.positional:
                kwargs["required"] = True
        else:
            kwargs["default"] = argparse.SUPPRESS  # absent: the model's default (or the env)
            if flag.positional:
                kwargs["nargs"] = "?"
        kwargs.update(_argparse_type(name, field.annotation))
        if flag.positional and kwargs.get("action") == "append":  # RUN [RUN ...]
            del kwargs["action"]
            kwargs["nargs"] = "+" if field.is_required() else "*"
        target: Any = parser
        if flag.exclusive is not None:
            if flag.exclusive not in groups:
                groups[flag.exclusive] = parser.add_mutually_exclusive_group()
            target = groups[flag.exclusive]
        target.add_argument(*names, **kwargs)
    if environment:
        parser.epilog = "read from the environment only:\n" + "\n".join(environment)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its refusals raised as ``UsageError`` (with the usage line) for the
    command to say (``verifiers.cli.usage``) instead of exiting here."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, usage=self.format_usage())


class _Help(argparse.RawDescriptionHelpFormatter):
    """Help lines wrapped between words only: ``--api-key-file`` is never cut at a hyphen."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def parse_settings(
    model: type[Settings],
    argv: Sequence[str] | None,
    prog: str,
    description: str | None = None,
    environ: Mapping[str, str] = os.environ,
) -> Settings:
    """``argv`` parsed into ``model``: a flag given wins, then the field's environment variable
    (a list field's variable adds its ``os.pathsep``-separated items), then the default. A
    value the model refuses is a ``UsageError`` with the flag named, said as argparse says
    its own refusals (``verifiers.cli.usage``: exit 2)."""
    parser = build_parser(model, prog, description)
    return validate_settings(model, vars(parser.parse_args(argv)), parser, environ)


def validate_settings(
    model: type[Settings],
    parsed: Mapping[str, Any],
    parser: argparse.ArgumentParser,
    environ: Mapping[str, str] = os.environ,
) -> Settings:
    """The settings of ``model`` from what ``parser`` (made by :func:`add_settings`) parsed:
    ``parsed`` may hold other names too (a subcommand's), only the model's fields are read. A
    value the model refuses is ``parser.error`` with the flag named."""
    given = {name: value for name, value in parsed.items() if name in model.model_fields}
    values = dict(given)
    for name, value in environment_values(model, environ).items():
        if isinstance(value, list):
            values[name] = [*values.get(name, []), *value]
        elif name not in values:
            values[name] = value
    try:
        settings = model.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0]) if error["loc"] else ""
        where = flag_text(name, model.model_fields[name]) if name in model.model_fields else name
        parser.error(f"{where}: {error['msg']} (got {error['input']!r})")
    settings._given = frozenset(given)
    return settings


def environment_values(
    model: type[BaseModel], environ: Mapping[str, str] = os.environ
) -> dict[str, Any]:
    """The settings of ``model`` whose environment variable is set (and not empty); a list
    field's variable holds ``os.pathsep``-separated items."""
    values: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        env = flag_of(field).env
        if env is None or not environ.get(env):
            continue
        if _is_list(field.annotation):
            values[name] = [item for item in environ[env].split(os.pathsep) if item]
        else:
            values[name] = environ[env]
    return values


def flag_text(name: str, field: FieldInfo) -> str:
    """How a user names the field: ``-n/--num-examples``, ``MODEL`` or ``$VF_WEIGHTS_SECRET``."""
    flag = flag_of(field)
    if not flag.command_line:
        return f"${flag.env}"
    if flag.positional:
        return name.upper()
    return "/".join([*flag.aliases, long_flag(name)])


def help_text(field: FieldInfo) -> str:
    """``description (default: X; or $ENV)``: what --help prints for the field."""
    flag = flag_of(field)
    default = "required" if field.is_required() else f"default: {default_text(_default(field))}"
    env = f"; or ${flag.env}" if flag.env else ""
    return f"{field.description or ''} ({default}{env})".strip()


def default_text(value: Any, none: str = "none") -> str:
    """A default as one types it: strings bare, None as ``none``, everything else JSON."""
    if value is None:
        return none
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return json.dumps(value)


def type_text(annotation: Any, none: str = "none") -> str:
    """A field's type as --help shows it: ``int``, ``float | none``, ``auto|varlen|off``."""
    origin = get_origin(annotation)
    if origin is Literal:
        return "|".join(str(arg) for arg in get_args(annotation))
    if origin in (Union, types.UnionType):
        models = _models_in(annotation)
        names = [_discriminator_value(m) for m in models]
        if models and all(names) and len(models) == len(get_args(annotation)):
            return "|".join(str(n) for n in names)
        return " | ".join(type_text(arg, none) for arg in get_args(annotation))
    if annotation is type(None):
        return none
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table"
    if origin is not None:
        args = ", ".join(type_text(arg, none) for arg in get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    return getattr(annotation, "__name__", str(annotation).removeprefix("typing."))


@dataclass(frozen=True)
class SettingRow:
    """One line of a nested config's --help."""

    key: str  # dotted: trainer.loss.clip_high
    type: str
    default: str
    description: str
    section: bool = False  # a table of further keys (its own line says what it is)


def settings_rows(
    model: type[BaseModel], instance: BaseModel | None = None, prefix: str = ""
) -> Iterator[SettingRow]:
    """Every key of ``model`` (its nested tables walked, after its own keys), with the default
    of ``instance`` (the field defaults when None), None shown as JSON's ``null``. A key that is
    one of several tables (a loss: grpo, dapo, ...) lists each one's keys, named after it."""
    sections = []
    for name, field in model.model_fields.items():
        key = prefix + name
        value = getattr(instance, name) if instance is not None else _default(field)
        models = _models_in(field.annotation)
        if len(models) == 1 and not _is_optional(field.annotation):  # a section: [trainer]
            sections.append((key, field, models[0], value))
            continue
        shown = _discriminator_value(value) if len(models) > 1 else None
        yield SettingRow(
            key,
            type_text(field.annotation, none="null"),
            default_text(shown if shown is not None else value, none="null"),
            field.description or "",
        )
        for member in models:
            tag = _discriminator_value(member)
            sub = value if isinstance(value, member) else None
            for row in settings_rows(member, sub or _instance(member), key + "."):
                if tag is not None and row.key == f"{key}.name":
                    continue  # the member's name is the parent key's value
                when = f" [{key} = {tag}]" if tag is not None else ""
                yield SettingRow(
                    row.key, row.type, row.default, row.description + when, row.section
                )
    for key, field, section, value in sections:
        yield SettingRow(key, "table", "", field.description or "", section=True)
        yield from settings_rows(section, value, key + ".")


def settings_help(model: type[BaseModel]) -> str:
    """``--dotted.key  TYPE  (default: X)  description``, one line per key of ``model``."""
    rows = list(settings_rows(model, _instance(model)))
    width = max(len(r.key) + 2 for r in rows if not r.section)
    lines = []
    for row in rows:
        if row.section:
            lines.append(f"\n[{row.key}]  {row.description}".rstrip())
            continue
        left = f"  --{row.key}".ljust(width + 4)
        lines.append(f"{left}{row.type}  (default: {row.default})  {row.description}".rstrip())
    return "\n".join(lines)


def _default(field: FieldInfo) -> Any:
    return field.get_default(call_default_factory=True)


def _instance(model: type[BaseModel]) -> BaseModel:
    """The defaults as declared: the default factories run, not the validators (which resolve
    ``autocast = "auto"`` for one run)."""
    return model.model_construct()


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    candidates = (
        get_args(annotation)
        if get_origin(annotation) in (Union, types.UnionType)
        else (annotation,)
    )
    return [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]


def _discriminator_value(model: Any) -> Any:
    """The ``name`` a member of a union of tables is chosen by (``grpo``), or None."""
    cls = model if isinstance(model, type) else type(model)
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        return None
    field = cls.model_fields.get("name")
    if field is None or get_origin(field.annotation) is not Literal:
        return None
    return get_args(field.annotation)[0]


def _non_none(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _is_optional(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)


def _is_list(annotation: Any) -> bool:
    return get_origin(_non_none(annotation)) is list


def _argparse_type(name: str, annotation: Any) -> dict[str, Any]:
    """argparse's ``type``/``action``/``choices`` for a field's annotation."""
    annotation = _non_none(annotation)
    origin = get_origin(annotation)
    if annotation is bool:
        return {"action": "store_true"}
    if origin is list:
        (item,) = get_args(annotation)
        return {"action": "append", **_argparse_type(name, item)}
    if origin is Literal:
        choices = get_args(annotation)
        return {"choices": choices, "type": type(choices[0])}
    if annotation in (int, float, str):
        return {"type": annotation}
    raise TypeError(f"setting {name!r}: no command-line form for {annotation!r}")
