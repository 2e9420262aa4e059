"""What an environment package may install on this hub: one import name, its own, nothing that
runs at startup, and no entry point or command that answers for another environment or the SDK.

The layout of the wheel (startup hooks, metadata directories, data schemes, namespace packages)
is checked as it is read (``hub_protocol.archives.inspect_wheel``, with the rules of
``verifiers.installs.confinement``); here, what is the hub's own rule:

- an environment installs exactly one top-level import name, its distribution name normalized
  (``reverse-text`` installs ``reverse_text``, as a module or a regular package: the layout of
  ``vf-init``'s scaffolds and of every environment in ``environments/``). No environment can
  take a name another environment (published or not yet) will need, so the hub never has to
  compare an upload with other environments: no refusal depends on, or names, anyone else's
  environment (a private one stays invisible; a first claim cannot lock a name). Two owners may
  publish the same distribution name; an install never puts both in one Python;
- that name, exactly (import names are case-sensitive: an environment ``crypto`` may not ship
  ``Crypto``, pycryptodome's), is not one of this SDK, the standard library, the packaging tools
  every Python has, or a distribution this SDK can install with any of its extras;
- entry points only for ``owner/name`` (``load_environment("alice/x")`` must only ever run
  alice's ``x``).
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

__all__ = [
    "ENTRY_POINT_GROUP",
    "entry_point_problem",
    "import_name_of",
    "reserved_top_level",
    "top_level_problem",
]


TOOLING_MODULES = frozenset({"pip", "setuptools", "pkg_resources", "wheel", "test", "tests"})
"""Names nearly every Python has (the packaging tools; the standard library's ``test``, which
``sys.stdlib_module_names`` leaves out) or that many packages wrongly ship (``tests``)."""


@cache
def reserved_top_level() -> frozenset[str]:
    """Modules no environment may install: the SDK's, the startup hooks, the stdlib's, the
    packaging tools', and those of every distribution the SDK can install, with any of its
    extras (by the installed distributions' own top-level names, and by its name where one is
    not installed here: ``torch`` for torch)."""
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
        names |= owners.get(dist, {import_name_of(dist)})
        todo += _requirements_with_every_extra(dist)
    return frozenset(names | reserved_names() | TOOLING_MODULES)


def _requirements_with_every_extra(dist: str) -> list[str]:
    """The distributions ``dist`` requires, with or without any of its extras."""
    try:
        found = metadata.distribution(dist)
    except metadata.PackageNotFoundError:
        return []
    extras = ["", *(found.metadata.get_all("Provides-Extra") or [])]
    names = []
    for line in found.requires or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        marker = requirement.marker
        if marker is None or any(marker.evaluate({"extra": extra}) for extra in extras):
            names.append(requirement.name)
    return names


def import_name_of(distribution: str) -> str:
    """The one import name ``distribution`` may install: PEP 503 normalized, ``-`` as ``_``."""
    return canonicalize_name(distribution).replace("-", "_")


def top_level_problem(top_level: list[str], distribution: str) -> str | None:
    """Why a wheel of ``distribution`` may not install these top-level names, or None. Its own
    name is matched exactly: imports are case-sensitive, so ``PIL/`` is another package's name
    whatever the environment is called."""
    own = import_name_of(distribution)
    for module in top_level:
        if module != own:
            return (
                f"the wheel installs the top-level name {module!r}: an environment installs one "
                f"import name, its own ({own!r}, from its name {distribution!r}); move "
                f"{module!r} inside the {own} package"
            )
    if top_level and own.casefold() in {name.casefold() for name in reserved_top_level()}:
        return (
            f"the wheel installs {own!r}, which belongs to this SDK, the standard library or one "
            "of their dependencies: pick another name for the environment"
        )
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
