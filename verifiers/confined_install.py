"""Installing packages so that every distribution stays confined to its own names.

``prime env install`` and ``vf-install`` both install through here:

1. uv resolves the plan against the target (``--dry-run``): what it would add and remove;
2. exactly that plan is installed into a staging prefix beside the target, wheels only
   (``--no-build``: no dependency's build code runs; a local project of ``vf-install`` is
   still built, it is the user's own source);
3. every staged distribution, not only the one asked for, is judged: the layout rules of
   ``verifiers.package_confinement`` (the requested packages as environments, the rest as
   dependencies), then against the target (``verifiers.install_target``): no file, import name,
   command or startup import of another distribution, no command that shadows one on ``PATH``;
4. only when nothing is wrong are the replaced versions uninstalled and the staged files moved
   into place, so what runs later is byte for byte what was checked. A refusal installs nothing.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name

from verifiers.install_target import Target, importable, probe
from verifiers.package_confinement import (
    STARTUP_MODULES,
    Installs,
    Problem,
    entry_point_problems,
    import_name,
    layout_problems,
    reserved_names,
    top_level_names,
)

_PLAN_LINE = re.compile(r"^ ([+-]) ([A-Za-z0-9][A-Za-z0-9._-]*)(?:==(\S+))?(?: @ (\S+))?")


class ConfinementError(Exception):
    """The install was refused before anything changed; ``problems`` says why."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        lines = "\n".join(f"  - [{p.code}] {p.message}" for p in problems[:20])
        more = f"\n  (and {len(problems) - 20} more)" if len(problems) > 20 else ""
        super().__init__(
            "refusing to install: a package reaches outside itself (nothing was installed)\n"
            + lines
            + more
        )


class InstallFailed(Exception):
    """uv itself failed (resolution, download, build); the message is its own."""


@dataclass
class Requested:
    """A distribution the user asked for by name, held to an environment's rules: its
    ``verifiers.environments`` entry points may only use ``ids``; ``editable_root`` is the
    project a ``vf-install -e`` points its ``.pth`` at."""

    distribution: str
    ids: set[str]
    editable_root: Path | None = None


@dataclass
class Plan:
    add: dict[str, str | None] = field(default_factory=dict)  # canonical -> pin (None: as asked)
    remove: list[str] = field(default_factory=list)


@dataclass
class Staged:
    installs: Installs
    canonical: str
    files: list[Path]  # absolute, in the stage
    relative: list[str]  # as RECORD names them, relative to site-packages


def install(
    uv: str,
    python: str,
    requirements: list[str],
    requested: list[Requested],
    *,
    resolve_args: list[str] = (),  # type: ignore[assignment]
    env: dict[str, str] | None = None,
) -> list[tuple[str, str]]:
    """Install ``requirements`` (uv arguments: ``-r FILE``, ``-e DIR``, ...) into ``python``
    under the rules above; returns the (name, version) pairs installed."""
    plan = _plan(uv, python, [*resolve_args, *requirements], env)
    if not plan.add:
        return []
    target = probe(python)
    stage = Path(tempfile.mkdtemp(prefix=".vf-stage-", dir=target.prefix))
    try:
        wanted = {canonicalize_name(r.distribution) for r in requested}
        pins = [pin for name, pin in plan.add.items() if name not in wanted and pin]
        exclusions = [a for i, a in enumerate(resolve_args) if _is_exclusion(resolve_args, i)]
        _uv(
            uv,
            [
                "pip",
                "install",
                "--prefix",
                str(stage),
                "--python",
                python,
                "--no-deps",
                "--no-build",
                *exclusions,
                *requirements,
                *pins,
            ],
            env,
        )
        staged = _read_stage(stage, target, plan)
        problems = judge(staged, target, requested, set(plan.remove))
        if problems:
            raise ConfinementError(problems)
        if plan.remove:
            _uv(uv, ["pip", "uninstall", "--python", python, *plan.remove], env)
        for item in staged:
            _move_into_place(item, target)
        return [(s.installs.distribution, s.installs.version) for s in staged]
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _is_exclusion(args: list[str], index: int) -> bool:
    """``--excludes FILE`` pairs of the resolution arguments also hold while staging."""
    return args[index] == "--excludes" or (index > 0 and args[index - 1] == "--excludes")


def _uv(uv: str, args: list[str], env: dict[str, str] | None) -> str:
    result = subprocess.run([uv, *args], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise InstallFailed((result.stderr or result.stdout).strip()[-3000:])
    return result.stderr + result.stdout


def _plan(uv: str, python: str, args: list[str], env: dict[str, str] | None) -> Plan:
    out = _uv(uv, ["pip", "install", "--dry-run", "--python", python, "--no-build", *args], env)
    plan = Plan()
    for line in out.splitlines():
        match = _PLAN_LINE.match(line)
        if not match:
            continue
        sign, name, version, url = match.groups()
        if sign == "-":
            plan.remove.append(name)
        else:
            pin = f"{name} @ {url}" if url else (f"{name}=={version}" if version else None)
            plan.add[canonicalize_name(name)] = pin
    return plan


def _read_stage(stage: Path, target: Target, plan: Plan) -> list[Staged]:
    """Each planned distribution as staged: its RECORD sorted into site files, commands and data."""
    purelib = stage / target.purelib.relative_to(target.prefix)
    scripts = stage / target.scripts.relative_to(target.prefix)
    dist_infos: dict[str, list[Path]] = {}
    for info in purelib.glob("*.dist-info"):
        name = canonicalize_name(info.name[: -len(".dist-info")].rpartition("-")[0])
        dist_infos.setdefault(name, []).append(info)
    staged, claimed = [], {}
    for name in plan.add:
        infos = dist_infos.get(name, [])
        if len(infos) != 1:
            raise ConfinementError(
                [
                    Problem(
                        "extra_metadata",
                        f"{name} arrived with {len(infos)} metadata directories "
                        f"({', '.join(i.name for i in infos) or 'none'}); a distribution has one",
                    )
                ]
            )
        info = infos[0]
        dist = metadata.PathDistribution(info)
        installs = Installs(dist.metadata["Name"], dist.version, info.name)
        installs.entry_points = {}
        for point in dist.entry_points:
            installs.entry_points.setdefault(point.group, {})[point.name] = point.value
        files, relative = [], []
        for row in csv.reader(io.StringIO((info / "RECORD").read_text())):
            if not row:
                continue
            path = Path(os.path.normpath(purelib / row[0]))
            if stage not in path.parents:
                raise InstallFailed(f"{installs.distribution}'s RECORD names {row[0]!r} outside")
            files.append(path)
            relative.append(row[0])
            claimed.setdefault(path, []).append(installs.distribution)
            if purelib in path.parents:
                installs.site.append(path.relative_to(purelib).as_posix())
            elif path.parent == scripts:
                installs.scripts.append(path.name)
            else:
                installs.data.append(path.relative_to(stage).as_posix())
        staged.append(Staged(installs, name, files, relative))
    problems = [
        Problem("foreign_file", f"{' and '.join(owners)} both install {path.relative_to(stage)}")
        for path, owners in claimed.items()
        if len(owners) > 1
    ]
    unaccounted = [
        p for p in stage.rglob("*") if p.is_file() and p not in claimed and p.name != ".lock"
    ]
    problems += [
        Problem("unaccounted_file", f"{p.relative_to(stage)} was staged but no RECORD lists it")
        for p in unaccounted
    ]
    if problems:
        raise ConfinementError(problems)
    return staged


def judge(
    staged: list[Staged], target: Target, requested: list[Requested], removed: set[str]
) -> list[Problem]:
    """Everything wrong with installing ``staged`` into ``target`` (empty: go ahead)."""
    by_name = {canonicalize_name(r.distribution): r for r in requested}
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
        for rel in item.relative:
            dest = Path(os.path.normpath(target.purelib / rel))
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
                if importable(directory / entry):
                    names.add(import_name(entry))
                    problems += _root_name_problems(installs, directory / entry, target, mine)
    return problems


def _root_name_problems(
    installs: Installs, path: Path, target: Target, mine: set[str]
) -> list[Problem]:
    name = import_name(path.name)
    if name in reserved_names():
        return [
            Problem(
                "startup_module" if name in STARTUP_MODULES else "foreign_module",
                f"{installs.distribution} puts {path} on sys.path, which answers for {name!r} "
                "(this SDK, the standard library or a startup hook)",
            )
        ]
    namespace = path.is_dir() and not (path / "__init__.py").exists()
    return _name_problems(installs, name, namespace, target, mine)


def _move_into_place(item: Staged, target: Target) -> None:
    for path, rel in zip(item.files, item.relative, strict=True):
        dest = Path(os.path.normpath(target.purelib / rel))
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(path, dest)
        except OSError:
            shutil.copy2(path, dest)
