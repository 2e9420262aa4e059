"""``load_environment``: find an installed environment package by id and build it.

An id is ``name``, ``owner/name`` or either with ``@version``. Lookup order: the entry-point group
``verifiers.environments`` (``owner/name`` entries first when an owner is given), then importing the
module named after the id (``-`` → ``_``). The error names everything that was tried. A module
without ``load_environment`` is built by a registered kind when one claims it (a ``verifiers.v1``
taskset package: ``register_module_kind``), after the same owner and version checks.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import logging
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import (
    PackageNotFoundError,
    entry_points,
    packages_distributions,
    version,
)
from pathlib import Path
from types import ModuleType
from typing import Any

from verifiers import classic
from verifiers.errors import EnvironmentNotFoundError
from verifiers.loading.env_id import EnvId, EnvIdError

ENTRY_POINT_GROUP = "verifiers.environments"
logger = logging.getLogger("verifiers.loading.loader")


ModuleKind = Callable[[EnvId, ModuleType], Callable[..., Any] | None]
"""Another kind of environment package: given the parsed id and the imported module (one with
no ``load_environment``), the factory that builds it as an ``Environment``, or None when the
module is not of this kind."""
_module_kinds: list[ModuleKind] = []


def register_module_kind(kind: ModuleKind) -> None:
    """Let ``load_environment`` build packages of another kind. ``verifiers.v1`` registers its
    tasksets when it is imported, which a v1 package's own import does: this room stays below
    it, and a classic run never imports it."""
    if kind not in _module_kinds:
        _module_kinds.append(kind)


def _kind_factory(parsed: EnvId, module: ModuleType | None) -> Callable[..., Any] | None:
    if module is None:
        return None
    for kind in _module_kinds:
        factory = kind(parsed, module)
        if factory is not None:
            return factory
    return None


def parse_env_id(env_id: str) -> EnvId:
    try:
        return EnvId.parse(env_id)
    except EnvIdError as exc:
        raise EnvironmentNotFoundError(str(exc)) from None


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def load_environment(env_id: str, **env_args: Any):
    """Build the environment ``env_id`` with ``env_args`` passed to its ``load_environment``.

    The package is found and its owner and version checked before any of its code runs; it is
    then imported and built with the behaviour of the classic release its ``verifiers``
    requirement names (``verifiers.classic``).
    """
    parsed, found, tried = locate_environment(env_id)
    installed = dist_version(found.dist_name)
    release, started = written_for_release(found.dist_name), time.perf_counter()
    with classic.written_for(release):
        built_as = classic.current()
        factory, module = found.load(tried)
        if factory is None:
            factory = _kind_factory(parsed, module)
        if factory is None:
            raise EnvironmentNotFoundError(
                f"{found.where} has no load_environment function (tried {'; '.join(tried)})"
            )
        try:
            env = factory(**env_args)
        except TypeError as exc:
            accepted = ", ".join(inspect.signature(factory).parameters) or "none"
            raise TypeError(
                f"load_environment of {parsed} rejected arguments {sorted(env_args)}: {exc} (it accepts: {accepted})"
            ) from exc
    if not env.env_id:
        env.env_id = f"{parsed.owner}/{parsed.name}" if parsed.owner else parsed.name
    env.env_args = dict(env_args)
    logger.debug(
        "loaded %s from %s (%s %s, built as verifiers %s) in %.2f s",
        parsed,
        found.where,
        found.dist_name,
        installed or "-",
        built_as,
        time.perf_counter() - started,
    )
    env.env_version = installed
    env.env_distribution = found.dist_name
    env.loaded_as = env_id
    env.env_content_hash = module_content_hash(module) if module is not None else None
    return env


def import_environment(env_id: str) -> None:
    """Import ``env_id``'s module as ``load_environment`` does (owner and version checked
    first, under its classic release), without building it: what a worker pool's template
    process imports once before it forks the workers (``verifiers.workers.process``)."""
    _, found, tried = locate_environment(env_id)
    with classic.written_for(written_for_release(found.dist_name)):
        found.load(tried)


def locate_environment(env_id: str) -> tuple[EnvId, Located, list[str]]:
    """The installed package ``env_id`` names, its owner and version checked, none of its code
    run: what a command checks before it starts anything heavy (vf-rl before torch).

    Returns the parsed id, where it was found, and every place that was tried."""
    parsed = parse_env_id(env_id)
    tried: list[str] = []
    found = _locate_entry_point(parsed, tried) or _locate_module(parsed, tried)
    if found is None:
        raise EnvironmentNotFoundError(
            f"no environment {str(parsed)!r} is installed (tried {'; '.join(tried)}). "
            f"Install it with `vf-install {parsed.name}` (local) or `prime env install {parsed.owner or 'OWNER'}/{parsed.name}` (hub)."
        )
    if parsed.owner and not found.owner_qualified:
        _check_owner(parsed, found.dist_name)
    installed = dist_version(found.dist_name)
    if parsed.version and installed and installed != parsed.version:
        raise EnvironmentNotFoundError(
            f"{found.dist_name} {installed} is installed but {parsed} was requested; "
            f"{_other_version_hint(parsed, found.dist_name)} or drop '@{parsed.version}'"
        )
    return parsed, found, tried


def _other_version_hint(parsed: EnvId, dist_name: str | None) -> str:
    """How to get the version asked for, as a command ``prime`` takes: the hub owner's id (the
    one recorded at install when the id names none); a local install (vf-install, pip) has no
    owner, and ``prime env install`` refuses to replace it, so it is removed first."""
    from verifiers.installs.provenance import installed_owner

    owner = parsed.owner or (installed_owner(dist_name) if dist_name else None)
    if owner is not None:
        return f"install that version (`prime env install {owner}/{parsed.name}@{parsed.version}`)"
    return (
        f"{parsed.name} is a local install (vf-install or pip), with no hub owner: to use a hub "
        f"release, remove it (`uv pip uninstall {dist_name}`), then `prime env install "
        f"OWNER/{parsed.name}@{parsed.version}` with its publisher as OWNER,"
    )


@dataclass
class Located:
    """An environment found without importing it: an entry point or a module name."""

    where: str
    dist_name: str | None
    owner_qualified: bool = False
    entry_point: Any = None
    module_name: str | None = None

    def load(self, tried: list[str]) -> tuple[Any, ModuleType | None]:
        """Import it; returns (its load_environment, the module)."""
        if self.entry_point is not None:
            target = self.entry_point.load()
            module = importlib.import_module(self.entry_point.module)
            factory = (
                target
                if callable(target) and not isinstance(target, ModuleType)
                else getattr(target, "load_environment", None)
            )
            return factory, module
        assert self.module_name is not None
        module = importlib.import_module(self.module_name)
        return getattr(module, "load_environment", None), module


def written_for_release(dist_name: str | None) -> str | None:
    """The classic release a distribution says it targets: the lower bound of its ``verifiers``
    requirement (None when it names none; the caller's setting then applies)."""
    if not dist_name:
        return None
    from importlib.metadata import PackageNotFoundError, requires

    try:
        version = classic.releases.from_requirements(requires(dist_name))
    except PackageNotFoundError:
        return None
    return str(version) if version is not None else None


def _check_owner(parsed: EnvId, dist_name: str | None) -> None:
    """``owner/name`` loads that owner's package or fails, naming the owner that is installed."""
    from verifiers.installs.provenance import installed_owner

    owner = installed_owner(dist_name) if dist_name else None
    if owner == parsed.owner:
        return
    if owner is None:
        raise EnvironmentNotFoundError(
            f"{parsed.name} is installed here, but not from a hub owner (a local install such as "
            f"vf-install): load it as '{parsed.name}', or install {parsed.owner}'s with "
            f"`prime env install {parsed.owner}/{parsed.name}`"
        )
    raise EnvironmentNotFoundError(
        f"the {parsed.name} installed here is {owner}/{parsed.name}, not {parsed.owner}/{parsed.name}; "
        f"load '{owner}/{parsed.name}', or replace it: prime env uninstall {owner}/{parsed.name} && "
        f"prime env install {parsed.owner}/{parsed.name}"
    )


def _locate_entry_point(parsed: EnvId, tried: list[str]) -> Located | None:
    wanted = [normalize(parsed.name)]
    if parsed.owner:
        wanted = [normalize(f"{parsed.owner}/{parsed.name}"), *wanted]
    found = {normalize(ep.name): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    for key in wanted:
        tried.append(f"entry point '{key}' in group '{ENTRY_POINT_GROUP}'")
        ep = found.get(key)
        if ep is not None:
            return Located(
                where=f"entry point {ep.value!r}",
                dist_name=ep.dist.name if ep.dist is not None else None,
                # an owner-qualified entry point names its owner (the hub refuses foreign ones)
                owner_qualified=bool(parsed.owner) and key == wanted[0],
                entry_point=ep,
            )
    return None


def _locate_module(parsed: EnvId, tried: list[str]) -> Located | None:
    from importlib.util import find_spec

    candidates = [parsed.module_name]
    if parsed.owner:
        candidates.insert(0, f"{parsed.owner.replace('-', '_')}__{parsed.module_name}")
    for name in candidates:
        tried.append(f"module '{name}'")
        try:
            spec = find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        origin = getattr(spec, "origin", None)
        locations = tuple(getattr(spec, "submodule_search_locations", None) or ())
        return Located(
            where=f"module {name!r}",
            dist_name=_dist_of_module(name, origin, locations, _installed_stamp()),
            module_name=name,
        )
    return None


def _installed_stamp() -> tuple[tuple[str, int], ...]:
    """The import path's directories as they are now (their mtimes change when a distribution
    is installed or removed in them): what a looked-up module's distribution is kept against."""
    stamp = []
    for entry in sys.path:
        with contextlib.suppress(OSError):
            stamp.append((entry, os.stat(entry or ".").st_mtime_ns))
    return tuple(stamp)


@functools.lru_cache(maxsize=64)
def _dist_of_module(
    name: str, origin: str | None, locations: tuple[str, ...], installed: Any
) -> str | None:
    """The distribution that installed module ``name`` (found at ``origin``, or a namespace
    package's ``locations``), found without importing it. Kept while nothing is installed or
    removed on the import path (``installed``): reading every distribution's RECORD takes 0.15 s
    of CPU, and a worker pool's template looks it up before it forks, so that its workers do
    not each look again.

    ``packages_distributions`` knows only what a distribution's RECORD or ``top_level.txt``
    lists; an editable install (``vf-install``, ``pip install -e``) lists a ``.pth`` file or an
    import hook instead, so it is also matched by its project directory holding the module's
    file. Without this an editable environment lost its ``verifiers`` requirement, and with it
    the release it was written for."""
    dists = packages_distributions().get(name, [])
    if dists:
        return dists[0]
    if not origin:
        origin = locations[0] if locations else None
    if not origin:
        return None
    module_path = Path(origin).resolve()
    from importlib.metadata import PackageNotFoundError, distribution, distributions

    try:  # the usual case: the distribution is named as the module (old_env <- old-env)
        named = [distribution(name.replace("_", "-"))]
    except PackageNotFoundError:
        named = []
    best: tuple[int, str] | None = None
    for dist in [*named, *distributions()]:
        source = _editable_dir(dist)
        if source is None or not module_path.is_relative_to(source):
            continue
        depth = len(source.parts)  # the innermost project holding the file is its own
        if best is None or depth > best[0]:
            best = (depth, dist.metadata["Name"])
        if dist in named:
            break
    return best[1] if best else None


def dist_version(dist_name: str | None) -> str | None:
    """The version the code has: for an editable install, its pyproject's (a `--bump` shows at
    once, without reinstalling); otherwise the installed metadata's."""
    if not dist_name:
        return None
    try:
        installed = version(dist_name)
    except PackageNotFoundError:
        return None
    source = editable_source(dist_name)
    if source is not None:
        try:
            import tomllib

            project = tomllib.loads((source / "pyproject.toml").read_text()).get("project", {})
            return str(project.get("version") or installed)
        except (OSError, ValueError):
            return installed
    return installed


def editable_source(dist_name: str) -> Path | None:
    """The project directory of an editable install (PEP 610 direct_url.json), else None."""
    from importlib.metadata import distribution

    try:
        return _editable_dir(distribution(dist_name))
    except PackageNotFoundError:
        return None


def _editable_dir(dist: Any) -> Path | None:
    import json
    from urllib.parse import unquote, urlparse

    try:
        raw = dist.read_text("direct_url.json")
        info = json.loads(raw) if raw else {}
    except (OSError, ValueError):  # unreadable, not JSON
        return None
    if not isinstance(info, dict) or not (info.get("dir_info") or {}).get("editable"):
        return None
    url = urlparse(info.get("url", ""))
    return Path(unquote(url.path)).resolve() if url.scheme == "file" else None


def module_content_hash(module: ModuleType) -> str | None:
    """The environment's content hash (``verifiers.installs.content_hash``) from the loaded module's
    files: a package's whole directory, or a single module file."""
    from verifiers.installs.content_hash import content_hash as hash_files

    path = getattr(module, "__file__", None)
    if not path:
        return None
    file = Path(path)
    if file.name == "__init__.py":
        root = file.parent.parent  # site-packages, or the source dir of an editable install
        files = sorted(p for p in file.parent.rglob("*") if p.is_file())
    else:
        root, files = file.parent, [file]
    return hash_files((f.relative_to(root).as_posix(), f.read_bytes()) for f in files)
