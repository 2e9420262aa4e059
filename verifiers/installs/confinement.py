"""What a package may install: its own import names, its own commands, its own metadata.

One set of rules for every place a package is judged: the hub at upload (the wheel's members) and
``prime env install`` / ``vf-install`` at install (each distribution uv staged, see
``verifiers.installs.confined``). Routes by which an installed package could run code it was not
asked to, or take over something that is not its own, and the rule that closes each:

- code at every interpreter start: a ``.pth`` file, a ``sitecustomize`` / ``usercustomize``
  module (source, bytecode, extension or package), a module that common ``.pth`` files import
  (``_distutils_hack``, ``_virtualenv``, setuptools' ``__editable__`` finders), a ``__pycache__``
  at the top of site-packages (bytecode for other distributions' modules);
- another's import names: a top-level name of this SDK (``SDK_MODULES``) or of the standard
  library, whatever the file (``verifiers.pyc``, ``verifiers.abi3.so``), wherever the wheel puts
  it (top level, ``.data/purelib``, ``.data/platlib``, ``.data/data/.../site-packages``, or any
  path a link of the target takes into a ``sys.path`` directory, such as ``lib64/...``);
- discovery: a second metadata directory (``*.dist-info``, ``*.egg-info``, ``*.egg-link``,
  ``*.egg``, any case, any depth), whose entry points importlib.metadata would load as if
  another distribution were installed; a ``verifiers.environments`` entry point for an id that
  is not the package's own, or that runs a module it does not contain;
- commands: a console or gui script (or a ``.data/scripts`` file) named like the SDK's commands
  or the interpreter.

An *environment* (the package a user asked for by name) is held to more: regular packages
only (a namespace portion could slip into another distribution's package), no ``.data`` scheme
but purelib/platlib, commands named after itself, and entry points only in the groups an
environment needs. What is checked against the target Python (another distribution's files,
names and commands) lives in ``verifiers.installs.confined``; what is checked against the hub
(another owner's modules) in ``hub_server.services.package_rules``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

ENTRY_POINT_GROUP = "verifiers.environments"
SDK_MODULES = frozenset({"verifiers", "hub_client", "hub_protocol", "hub_server"})
"""The SDK's top-level packages (``[tool.hatch.build.targets.wheel] packages``; a test checks)."""
STARTUP_MODULES = frozenset({"sitecustomize", "usercustomize", "_distutils_hack", "_virtualenv"})
"""Modules imported at every interpreter start, wherever they are found: by ``site`` itself, by
setuptools' ``distutils-precedence.pth`` and by virtualenv's ``_virtualenv.pth`` (present in
many a Python, and judged at upload where the target Python is unknown)."""
EDITABLE_FINDER_PREFIX = "__editable__"  # setuptools' editable installs: a .pth imports each
ENVIRONMENT_GROUPS = frozenset({ENTRY_POINT_GROUP, "console_scripts", "gui_scripts"})
SCRIPT_GROUPS = ("console_scripts", "gui_scripts")
METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg-link", ".egg")


@dataclass(frozen=True)
class Problem:
    """One way a package reaches outside itself: a stable code and what to do about it."""

    code: str
    message: str


@dataclass
class Installs:
    """What one distribution puts where: paths relative to the ``sys.path`` directory that
    imports them (``site``), command names (``scripts``), other paths relative to the prefix
    (``data``: the data and headers schemes), paths that resolve outside the prefix
    (``outside``, through a link of the target), and its entry points. ``metadata_dir`` is its
    own ``*.dist-info``."""

    distribution: str
    version: str
    metadata_dir: str
    site: list[str] = field(default_factory=list)
    scripts: list[str] = field(default_factory=list)
    data: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    import_roots: list[str] = field(default_factory=list)  # files placed at a sys.path entry
    entry_points: dict[str, dict[str, str]] = field(default_factory=dict)


def import_name(entry: str) -> str:
    """The import name a top-level site-packages entry can answer for: everything before the
    first dot (``verifiers.pyc``, ``verifiers.cpython-311-x86_64-linux-gnu.so`` and
    ``verifiers/`` are all ``verifiers``). Deliberately wider than what ``import`` accepts."""
    return entry.split(".", 1)[0]


def is_metadata_name(part: str) -> bool:
    return part.lower().endswith(METADATA_SUFFIXES)


def metadata_owner(part: str) -> str:
    """The distribution a metadata entry speaks for, PEP 503-normalized
    (``Foo_Bar-1.0.dist-info``, ``foo_bar.egg-info`` and ``foo_bar-1.0-py3.11.egg`` are
    ``foo-bar``)."""
    stem = part[: -len(next(s for s in METADATA_SUFFIXES if part.lower().endswith(s)))]
    return canonicalize_name(stem.split("-", 1)[0])


def is_own_metadata_dir(part: str, distribution: str, version: str) -> bool:
    """``part`` is ``<distribution>-<version>.dist-info`` (names compared after PEP 503
    normalization, versions by PEP 440)."""
    if not part.endswith(".dist-info"):
        return False
    name, _, raw_version = part[: -len(".dist-info")].rpartition("-")
    try:
        same_version = Version(raw_version) == Version(version)
    except InvalidVersion:
        same_version = raw_version == version
    return canonicalize_name(name) == canonicalize_name(distribution) and same_version


def top_level_names(site: list[str], metadata_dir: str) -> list[str]:
    """The import names ``site`` paths take (``import_name`` of each top-level entry)."""
    return sorted(
        {
            import_name(path.split("/", 1)[0])
            for path in site
            if path.split("/", 1)[0] != metadata_dir and not path.lower().endswith(".pth")
        }
    )


@cache
def sdk_commands() -> frozenset[str]:
    """The SDK's own commands (``[project.scripts]``, read from its installed metadata)."""
    try:
        points = metadata.distribution("verifiers").entry_points
    except metadata.PackageNotFoundError:
        return frozenset()
    return frozenset(p.name for p in points if p.group in SCRIPT_GROUPS)


def reserved_names() -> frozenset[str]:
    """Import names no package may install: the SDK's, the startup hooks, the stdlib's."""
    return SDK_MODULES | STARTUP_MODULES | frozenset(sys.stdlib_module_names)


@cache
def _reserved_folded() -> dict[str, str]:
    return {name.casefold(): name for name in reserved_names()}


def reserved_as(name: str) -> str | None:
    """The reserved name ``name`` stands for, compared case-insensitively (a case-insensitive
    filesystem, macOS's, imports ``Verifiers/`` as ``verifiers``), or None."""
    if name.casefold().startswith(EDITABLE_FINDER_PREFIX):
        return name
    return _reserved_folded().get(name.casefold())


def command_problem(command: str, distribution: str, environment: bool) -> Problem | None:
    """Why ``distribution`` may not install the command ``command``, or None."""
    lowered = command.lower()
    if command in sdk_commands() or lowered.startswith(("python", "activate", "deactivate")):
        return Problem(
            "foreign_command",
            f"{distribution} installs the command {command!r}, which belongs to this SDK or to "
            "the interpreter",
        )
    own = canonicalize_name(distribution)
    if environment and not canonicalize_name(command).startswith(own):
        return Problem(
            "foreign_command",
            f"{distribution} installs the command {command!r}: an environment's commands are "
            f"named after it ({own}, {own}-...)",
        )
    return None


def site_problems(installs: Installs, environment: bool) -> list[Problem]:
    """Startup code, reserved names, foreign metadata and (for an environment) namespace
    portions among the files a distribution puts in site-packages."""
    problems: list[Problem] = []
    dist = installs.distribution
    package_dirs = {p.split("/", 1)[0] for p in installs.site if "/" in p}
    for path in installs.site:
        parts = path.split("/")
        top = parts[0]
        if top == installs.metadata_dir:
            continue
        if any(is_metadata_name(part) for part in parts):
            problems.append(
                Problem(
                    "extra_metadata",
                    f"{dist} installs {path!r}: a second metadata directory makes "
                    "importlib.metadata see a distribution (and entry points) that is not this one",
                )
            )
        elif len(parts) == 1 and top.lower().endswith(".pth"):
            problems.append(
                Problem(
                    "pth_file",
                    f"{dist} installs {top!r}: .pth files run code at every interpreter start",
                )
            )
        elif top == "__pycache__":
            problems.append(
                Problem(
                    "startup_module",
                    f"{dist} installs {path!r}: bytecode at the top of site-packages stands in for "
                    "modules of other distributions",
                )
            )
        elif (reserved := reserved_as(import_name(top))) is not None:
            code = (
                "startup_module"
                if reserved in STARTUP_MODULES or reserved.startswith(EDITABLE_FINDER_PREFIX)
                else "foreign_module"
            )
            problems.append(
                Problem(
                    code,
                    f"{dist} installs {path!r}: {reserved!r} belongs to this SDK, the "
                    "standard library, or runs at every interpreter start",
                )
            )
    if environment:
        for top in sorted(package_dirs - {installs.metadata_dir}):
            if f"{top}/__init__.py" not in installs.site and not is_metadata_name(top):
                problems.append(
                    Problem(
                        "namespace_package",
                        f"{dist} installs {top + '/'!r} without an __init__.py: an environment's "
                        "packages are regular packages (a namespace portion merges into whatever "
                        "else has that name); add the __init__.py, or move data files into the "
                        "package",
                    )
                )
    return problems


def entry_point_problems(
    dist: str,
    entry_points: dict[str, dict[str, str]],
    own_ids: set[str],
    top_level: set[str],
    environment: bool,
) -> list[Problem]:
    """``verifiers.environments`` entries must be one of ``own_ids`` and run one of the
    package's own modules (``top_level``); an environment declares nothing but those and its
    commands."""
    problems: list[Problem] = []
    for group, entries in entry_points.items():
        if environment and group not in ENVIRONMENT_GROUPS:
            problems.append(
                Problem(
                    "foreign_entry_point",
                    f"{dist} declares entry points in {group!r}, which other programs load on "
                    f"their own: an environment declares only {sorted(ENVIRONMENT_GROUPS)}",
                )
            )
        for entry, target in entries.items():
            module = target.split(":", 1)[0].strip().split(".")[0]
            if group == ENTRY_POINT_GROUP:
                key = "/".join(canonicalize_name(part) for part in entry.split("/"))
                if key not in own_ids:
                    problems.append(
                        Problem(
                            "foreign_entry_point",
                            f"{dist}: entry point {entry!r} in {ENTRY_POINT_GROUP} is not its own id "
                            f"({', '.join(sorted(own_ids))})",
                        )
                    )
                elif module not in top_level:
                    problems.append(
                        Problem(
                            "foreign_entry_point",
                            f"{dist}: entry point {entry!r} runs {target!r}, which it does not contain",
                        )
                    )
            elif group in SCRIPT_GROUPS:
                problem = command_problem(entry, dist, environment)
                if problem is not None:
                    problems.append(problem)
    return problems


def layout_problems(installs: Installs, environment: bool) -> list[Problem]:
    """Where the files go: ``site_problems``, then the data schemes and commands."""
    problems = site_problems(installs, environment)
    problems += [
        Problem(
            "outside_prefix",
            f"{installs.distribution} would write {path}, outside the Python it installs into "
            "(a link of that Python's directories leads there)",
        )
        for path in installs.outside
    ]
    problems += [
        Problem(
            "import_root",
            f"{installs.distribution} would create {path}, an entry of the sys.path of the "
            "Python it installs into: whatever it holds would be imported from, ahead of "
            "site-packages (a lib/python3XY.zip runs its sitecustomize at every start)",
        )
        for path in installs.import_roots
    ]
    if environment and installs.data:
        problems.append(
            Problem(
                "data_scheme",
                f"{installs.distribution} installs {installs.data[0]!r} outside site-packages "
                "(.data/data or .data/headers): an environment installs only its own modules",
            )
        )
    for command in installs.scripts:
        problem = command_problem(command, installs.distribution, environment)
        if problem is not None:
            problems.append(problem)
    return problems
