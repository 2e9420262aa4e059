"""Whether staged distributions respect the target Python they would install into.

``judge`` holds each staged distribution to the layout rules of
``verifiers.installs.confinement`` (the requested ones as environments, the rest as
dependencies) and then to what the target already has (``verifiers.installs.target``): no
file, import name (or namespace portion), command or startup import of another distribution,
and no command that would shadow one on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name

from verifiers.installs.confinement import (
    STARTUP_MODULES,
    Installs,
    Problem,
    entry_point_problems,
    import_name,
    is_metadata_name,
    layout_problems,
    metadata_owner,
    reserved_as,
    top_level_names,
)
from verifiers.installs.target import Target, importable


@dataclass
class Requested:
    """A distribution the user asked for by name, held to an environment's rules: its
    ``verifiers.environments`` entry points may only use ``ids``; ``editable_root`` is the
    project a ``vf-install -e`` points its ``.pth`` at."""

    distribution: str
    ids: set[str]
    editable_root: Path | None = None


@dataclass
class Staged:
    installs: Installs
    canonical: str
    files: list[Path]  # absolute, in the stage
    relative: list[str]  # as RECORD names them, relative to site-packages
    destinations: list[Path] = field(default_factory=list)  # where each lands, links resolved


def judge(
    staged: list[Staged], target: Target, requested: list[Requested], removed: set[str]
) -> list[Problem]:
    """Everything wrong with installing ``staged`` into ``target`` (empty: go ahead)."""
    by_name: dict[str, Requested] = {canonicalize_name(r.distribution): r for r in requested}
    problems: list[Problem] = []
    replaced = {canonicalize_name(n) for n in removed}
    names_taken: dict[str, tuple[str, bool]] = {}
    commands_taken: dict[str, str] = {}
    for item in staged:
        ask = by_name.get(item.canonical)
        installs = item.installs
        mine = replaced | {item.canonical}
        root_names: set[str] = set()
        if ask is not None and ask.editable_root is not None:
            problems += _editable_problems(item, ask.editable_root, target, mine, root_names)
        ids = ask.ids if ask is not None else {item.canonical}
        if ask is None and item.canonical in target.environments():
            problems.append(_replaces_environment(installs, target.environments()[item.canonical]))
        if ask is None:
            problems += _data_problems(installs, item.canonical)
        top_level = set(top_level_names(installs.site, installs.metadata_dir)) | root_names
        problems += layout_problems(installs, environment=ask is not None)
        problems += entry_point_problems(
            installs.distribution, installs.entry_points, ids, top_level, ask is not None
        )
        for name, namespace in _names(installs).items():
            problems += _name_problems(installs, name, namespace, target, mine)
            other = names_taken.get(name)
            if other and not (other[1] and namespace):
                problems.append(
                    Problem(
                        "foreign_module",
                        f"{installs.distribution} and {other[0]} both install {name!r}",
                    )
                )
            names_taken.setdefault(name, (installs.distribution, namespace))
        for dest in item.destinations:
            problems += _path_problems(installs.distribution, dest, target, mine)
        for command in installs.scripts:
            if command in commands_taken:
                problems.append(
                    Problem(
                        "foreign_command",
                        f"{installs.distribution} and {commands_taken[command]} both install {command!r}",
                    )
                )
            commands_taken.setdefault(command, installs.distribution)
            problems += _command_problems(installs.distribution, command, target, mine)
    return problems


def _replaces_environment(installs: Installs, installed: str) -> Problem:
    """A dependency that would replace an installed environment would change what its id (or
    ``owner/name``) loads, while the install records still name the environment."""
    return Problem(
        "foreign_environment",
        f"{installs.distribution} {installs.version}, a dependency, would replace {installed}: "
        "a dependency never replaces an environment; install that one by name "
        "(prime env install OWNER/NAME or vf-install), or use a separate virtualenv",
    )


INERT_DATA = ("share/man/", "share/doc/", "share/licenses/", "share/info/")
"""Where a dependency's data files may land: documentation nothing reads as configuration or
code. (Its own ``share/<name>/`` and its headers, ``include/.../<name>/``, too.)"""


def _data_problems(installs: Installs, canonical: str) -> list[Problem]:
    """A dependency's data files (``.data/data``, ``.data/headers``) go only where no other
    program of the target reads them as its configuration or code: pip reads ``PREFIX/pip.conf``
    (an index of the package's choosing for every later install), IPython ``etc/ipython/``
    (Python it runs at start), Jupyter ``share/jupyter/kernels/`` (a command it runs), conda
    ``etc/conda/activate.d/``...; rather than name them all, only inert places are allowed."""
    problems = []
    for path in installs.data:
        parts = path.split("/")
        own = len(parts) > 2 and parts[0] == "share" and canonicalize_name(parts[1]) == canonical
        header = parts[0] == "include" and canonical in {canonicalize_name(p) for p in parts[1:-1]}
        if not (own or header or path.startswith(INERT_DATA)):
            problems.append(
                Problem(
                    "data_location",
                    f"{installs.distribution} would write {path} into the Python it installs "
                    "into, where other programs may read it as their configuration or code: a "
                    "dependency's data files go only in share/man, share/doc, share/licenses, "
                    f"share/{canonical}/ or its headers; install {installs.distribution} "
                    "yourself first if you trust it",
                )
            )
    return problems


def _names(installs: Installs) -> dict[str, bool]:
    """Top-level import names of the site files, each with whether it is a namespace portion."""
    names: dict[str, bool] = {}
    for path in installs.site:
        top, _, rest = path.partition("/")
        if top == installs.metadata_dir or top.lower().endswith(".pth"):
            continue
        name = import_name(top)
        is_portion = bool(rest) and f"{top}/__init__.py" not in installs.site
        names[name] = names.get(name, True) and is_portion
    return names


def _name_problems(
    installs: Installs, name: str, namespace: bool, target: Target, mine: set[str]
) -> list[Problem]:
    dist = installs.distribution
    if name in target.startup_imports:
        return [
            Problem(
                "startup_module",
                f"{dist} installs {name!r}, which a .pth file of this Python imports at every start",
            )
        ]
    for location in target.names.get(name, []):
        if namespace and location.namespace:  # two portions of one namespace
            clash = _portion_clash(installs, name, location.directory / location.entry, target)
            if clash is not None and clash[1] not in mine:
                return [
                    Problem(
                        "foreign_module",
                        f"{dist} installs {clash[0]}, which stands in for "
                        f"{clash[1] or 'no installed distribution'}'s module in the namespace {name!r}",
                    )
                ]
            continue
        if location.owner in mine:
            continue
        whose = location.owner or "no installed distribution"
        return [
            Problem(
                "foreign_module",
                f"{dist} installs {name!r}, which this Python already imports from "
                f"{location.directory / location.entry} ({whose})",
            )
        ]
    return []


def _portion_clash(
    installs: Installs, name: str, root: Path, target: Target
) -> tuple[str, str | None] | None:
    """A path of this namespace portion that would answer for (or hide) a module the portion
    at ``root`` already has: (the path, that module's owner), or None. Portions share only
    directories that are namespaces on both sides."""
    ours = [p.split("/", 1)[1] for p in installs.site if p.split("/", 1)[0] == name and "/" in p]
    for rel in ours:
        parts, current = rel.split("/"), root
        for depth, part in enumerate(parts):
            if not current.is_dir():
                break
            theirs = [
                current / e
                for e in os.listdir(current)
                if import_name(e) == import_name(part) and importable(current / e)
            ]
            if not theirs:
                break
            prefix = "/".join(parts[: depth + 1])
            ours_namespace = depth < len(parts) - 1 and not any(
                p.startswith(prefix + "/__init__.") for p in ours
            )
            if ours_namespace and all(_is_namespace(t) for t in theirs):
                current = current / part
                continue
            return f"{name}/{prefix}", _owner_of_entry(theirs[0], target)
    return None


def _is_namespace(path: Path) -> bool:
    return path.is_dir() and not any(c.name.startswith("__init__.") for c in path.iterdir())


def _owner_of_entry(path: Path, target: Target) -> str | None:
    if path.is_file():
        return target.owner_of(path)
    for child in sorted(path.rglob("*")):
        if child.is_file() and target.owner_of(child):
            return target.owner_of(child)
    return None


def _path_problems(dist: str, path: Path, target: Target, mine: set[str]) -> list[Problem]:
    if not path.exists() and not path.is_symlink():
        return []
    owner = target.owner_of(path)
    if owner in mine:
        return []
    return [
        Problem(
            "foreign_file",
            f"{dist} would replace {path}, which belongs to {owner or 'no installed distribution'}",
        )
    ]


def _command_problems(dist: str, command: str, target: Target, mine: set[str]) -> list[Problem]:
    if (target.scripts / command).exists():
        return []  # replacing it is judged as a file (_path_problems)
    outside = os.pathsep.join(
        p
        for p in os.environ.get("PATH", "").split(os.pathsep)
        if p and Path(p).resolve() != target.scripts
    )
    found = shutil.which(command, path=outside)
    if found:
        return [
            Problem(
                "foreign_command",
                f"{dist} installs the command {command!r}, which would shadow {found} for "
                "anyone who activates this environment",
            )
        ]
    return []


def _editable_problems(
    item: Staged, root: Path, target: Target, mine: set[str], names: set[str]
) -> list[Problem]:
    """An editable install's ``.pth`` may only put its own project on ``sys.path``, and what
    that makes importable is held to the same name rules. Takes the ``.pth`` out of the site
    files once it passed (the layout rules refuse any other)."""
    installs, problems = item.installs, []
    root = root.resolve()
    for path, rel in zip(item.files, item.relative, strict=True):
        if "/" in rel or not rel.lower().endswith(".pth"):
            continue
        lines = [
            line.strip()
            for line in path.read_text(errors="replace").splitlines()
            if line.strip() and not line.startswith("#")
        ]
        directories = [Path(line).resolve() for line in lines]
        if not all(d == root or root in d.parents for d in directories):
            continue  # left in the site files: the layout rules refuse it as a .pth
        installs.site.remove(rel)
        for directory in {d for d in directories if d.is_dir()}:
            for entry in sorted(os.listdir(directory)):
                if is_metadata_name(entry) and metadata_owner(entry) != item.canonical:
                    problems.append(
                        Problem(
                            "extra_metadata",
                            f"{installs.distribution} puts {directory / entry} on sys.path: "
                            "importlib.metadata would read it as another distribution (and load "
                            "its entry points); remove it from the project",
                        )
                    )
                elif importable(directory / entry):
                    names.add(import_name(entry))
                    problems += _root_name_problems(installs, directory / entry, target, mine)
    return problems


def _root_name_problems(
    installs: Installs, path: Path, target: Target, mine: set[str]
) -> list[Problem]:
    name = import_name(path.name)
    if (reserved := reserved_as(name)) is not None:
        return [
            Problem(
                "startup_module" if reserved in STARTUP_MODULES else "foreign_module",
                f"{installs.distribution} puts {path} on sys.path, which answers for {name!r} "
                "(this SDK, the standard library or a startup hook)",
            )
        ]
    namespace = path.is_dir() and not (path / "__init__.py").exists()
    return _name_problems(installs, name, namespace, target, mine)
