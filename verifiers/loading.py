"""``load_environment``: find an installed environment package by id and build it.

An id is ``name``, ``owner/name`` or either with ``@version``. Lookup order: the entry-point group
``verifiers.environments`` (``owner/name`` entries first when an owner is given), then importing the
module named after the id (``-`` → ``_``). The error names everything that was tried.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import re
from importlib.metadata import entry_points, packages_distributions, version
from pathlib import Path
from types import ModuleType
from typing import Any

from verifiers.env_id import EnvId, EnvIdError
from verifiers.errors import EnvironmentNotFoundError

ENTRY_POINT_GROUP = "verifiers.environments"


def parse_env_id(env_id: str) -> EnvId:
    try:
        return EnvId.parse(env_id)
    except EnvIdError as exc:
        raise EnvironmentNotFoundError(str(exc)) from None


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def load_environment(env_id: str, **env_args: Any):
    """Build the environment ``env_id`` with ``env_args`` passed to its ``load_environment``."""
    parsed = parse_env_id(env_id)
    tried: list[str] = []
    factory, dist_name, module = _from_entry_points(parsed, tried)
    if factory is None:
        factory, dist_name, module = _from_module(parsed, tried)
    if factory is None:
        raise EnvironmentNotFoundError(
            f"no environment {str(parsed)!r} is installed (tried {'; '.join(tried)}). "
            f"Install it with `vf-install {parsed.name}` (local) or `prime env install {parsed.owner or 'OWNER'}/{parsed.name}` (hub)."
        )
    installed = _dist_version(dist_name)
    if parsed.version and installed and installed != parsed.version:
        raise EnvironmentNotFoundError(
            f"{dist_name} {installed} is installed but {parsed} was requested; "
            f"install that version (e.g. `prime env install {parsed}`) or drop '@{parsed.version}'"
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
    env.env_version = installed
    env.env_distribution = dist_name
    env.env_content_hash = content_hash(module) if module is not None else None
    return env


def _from_entry_points(parsed: EnvId, tried: list[str]):
    wanted = [normalize(parsed.name)]
    if parsed.owner:
        wanted = [normalize(f"{parsed.owner}/{parsed.name}"), *wanted]
    found = {normalize(ep.name): ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    for key in wanted:
        tried.append(f"entry point '{key}' in group '{ENTRY_POINT_GROUP}'")
        ep = found.get(key)
        if ep is not None:
            target = ep.load()
            module = importlib.import_module(ep.module)
            factory = (
                target
                if callable(target) and not isinstance(target, ModuleType)
                else getattr(target, "load_environment", None)
            )
            dist = ep.dist.name if ep.dist is not None else None
            return factory, dist, module
    return None, None, None


def _from_module(parsed: EnvId, tried: list[str]):
    candidates = [parsed.module_name]
    if parsed.owner:
        candidates.insert(0, f"{parsed.owner.replace('-', '_')}__{parsed.module_name}")
    for name in candidates:
        tried.append(f"module '{name}'")
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise  # the module exists but one of its imports is missing: say so, don't hide it
        factory = getattr(module, "load_environment", None)
        if factory is None:
            tried[-1] += " (imported, but it has no load_environment)"
            continue
        dists = packages_distributions().get(name, [])
        return factory, dists[0] if dists else None, module
    return None, None, None


def _dist_version(dist_name: str | None) -> str | None:
    if not dist_name:
        return None
    try:
        return version(dist_name)
    except Exception:
        return None


def content_hash(module: ModuleType) -> str | None:
    """sha256 over the environment's source files, so results say exactly what code ran."""
    path = getattr(module, "__file__", None)
    if not path:
        return None
    file = Path(path)
    files = (
        sorted(p for p in file.parent.rglob("*") if p.is_file() and p.suffix != ".pyc")
        if file.name == "__init__.py"
        else [file]
    )
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.relative_to(file.parent).as_posix().encode() + b"\0")
        digest.update(f.read_bytes())
    return "sha256:" + digest.hexdigest()
