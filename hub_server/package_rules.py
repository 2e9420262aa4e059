"""What an environment package may install on this hub: its own modules, nothing that runs at
startup, and no entry point or command that answers for another environment or the SDK.

The layout of the wheel (startup hooks, metadata directories, data schemes, namespace packages)
is checked as it is read (``hub_protocol.archives.inspect_wheel``, with the rules of
``verifiers.installs.confinement``); here, what needs the hub: a top-level module of this SDK,
of the standard library, of one of the SDK's dependencies or of another environment on this hub,
and entry points for an id that is not ``owner/name`` (``load_environment("alice/x")`` must only
ever run alice's ``x``).
"""

from __future__ import annotations

from functools import cache
from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from verifiers.installs.confinement import (
    ENTRY_POINT_GROUP,
    SDK_MODULES,
    entry_point_problems,
    reserved_names,
)

__all__ = ["ENTRY_POINT_GROUP", "entry_point_problem", "reserved_top_level", "top_level_problem"]


@cache
def reserved_top_level() -> frozenset[str]:
    """Modules no environment may install: the SDK's, the startup hooks, the stdlib's, and the
    SDK's dependencies'."""
    owners: dict[str, set[str]] = {}
    for module, dists in metadata.packages_distributions().items():
        for dist in dists:
            owners.setdefault(canonicalize_name(dist), set()).add(module)
    names, todo, seen = set(SDK_MODULES), ["verifiers"], set()
    while todo:
        dist = canonicalize_name(todo.pop())
        if dist in seen:
            continue
        seen.add(dist)
        names |= owners.get(dist, set())
        try:
            requires = metadata.requires(dist) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return frozenset(names | reserved_names())


def top_level_problem(top_level: list[str], claimed_by_others: dict[str, str]) -> str | None:
    """Why these top-level modules may not be installed, or None (names compared
    case-insensitively: a case-insensitive filesystem imports ``Maze_Env/`` as ``maze_env``)."""
    reserved = {name.casefold() for name in reserved_top_level()}
    claimed = {name.casefold(): owner for name, owner in claimed_by_others.items()}
    for module in top_level:
        if module.casefold() in reserved:
            return f"the wheel installs {module!r}, which belongs to this SDK, the standard library or one of their dependencies"
        if module.casefold() in claimed:
            return f"the wheel installs {module!r}, which is {claimed[module.casefold()]}'s module"
    return None


def entry_point_problem(
    entry_points: dict[str, dict[str, str]], owner: str, name: str, top_level: list[str]
) -> str | None:
    """Why the package's entry points are not all its own, or None: ``verifiers.environments``
    only for ``name`` or ``owner/name`` and into its own modules, commands named after it, no
    other group."""
    own = {canonicalize_name(name), f"{canonicalize_name(owner)}/{canonicalize_name(name)}"}
    problems = entry_point_problems(name, entry_points, own, set(top_level), environment=True)
    return problems[0].message if problems else None
