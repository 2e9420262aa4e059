"""Installing packages so that every distribution stays confined to its own names.

``prime env install`` and ``vf-install`` both install through here:

1. uv resolves the plan against the target (``--dry-run``): what it would add and remove;
2. exactly that plan is installed into a staging prefix beside the target, wheels only
   (``--no-build``: no dependency's build code runs; a local project of ``vf-install`` is
   still built, it is the user's own source);
3. every staged distribution, not only the one asked for, is judged (``verifiers.installs.judge``):
   the layout rules, then against what the target already has;
4. only when nothing is wrong are the replaced versions uninstalled and the staged files moved
   into place, so what runs later is byte for byte what was checked. A refusal installs nothing.
"""

from __future__ import annotations

import csv
import fcntl
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name

from verifiers.errors import VFError
from verifiers.installs.confinement import Installs, Problem
from verifiers.installs.interpreter import prefix_of
from verifiers.installs.judge import Requested, Staged, judge
from verifiers.installs.target import Target, probe, real_destination
from verifiers.installs.uv_config import uv_command
from verifiers.processes.die_with_parent import guarded
from verifiers.processes.lock_file import open_lock_file

STAGE_PREFIX = ".vf-stage-"  # in the target's prefix: where a wheel is installed, then judged
INSTALL_LOCK = ".vf-install.lock"  # in the target's prefix: one install into it at a time
_PLAN_LINE = re.compile(r"^ ([+-]) ([A-Za-z0-9][A-Za-z0-9._-]*)(?:==(\S+))?(?: @ (\S+))?")


class ConfinementError(VFError):
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


class InstallFailed(VFError):
    """uv itself failed (resolution, download, build); the message is its own."""


@dataclass
class Plan:
    add: dict[str, str | None] = field(default_factory=dict)  # canonical -> pin (None: as asked)
    remove: list[str] = field(default_factory=list)


def install(
    uv: str,
    python: str,
    requirements: list[str],
    requested: list[Requested],
    *,
    resolve_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> list[tuple[str, str]]:
    """Install ``requirements`` (uv arguments: ``-r FILE``, ``-e DIR``, ...) into ``python``
    under the rules above; returns the (name, version) pairs installed."""
    asked = prefix_of(python)  # (the caller's steps asked it already)
    prefix = Path(asked).resolve() if asked else probe(python).prefix
    with _install_lock(prefix):  # one confined install per Python at a time
        uv_run = _Uv(uv, env)
        _remove_abandoned_stages(prefix)
        plan = _plan(uv_run, python, [*resolve_args, *requirements])
        if not plan.add:
            return []
        return _stage_judge_move(uv_run, python, requirements, requested, resolve_args, plan)


@contextmanager
def _install_lock(prefix: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``PREFIX/.vf-install.lock``, a file other users cannot open
    (``verifiers.processes.lock_file``): a shared virtualenv's group may, under its umask."""
    try:
        fd = open_lock_file(prefix / INSTALL_LOCK, 0o660)
    except OSError as exc:
        raise InstallFailed(
            f"cannot install into {prefix}: {exc.strerror} ({exc.filename})"
        ) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another install into {prefix} to finish", file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _remove_abandoned_stages(prefix: Path) -> None:
    """Stages that installs killed outright left behind (SIGKILL runs no cleanup): under the
    lock no other install into this Python is running, and the uv of a killed one was killed
    with it (``_Uv``), so every stage there is abandoned and nothing writes to it."""
    for stage in prefix.glob(f"{STAGE_PREFIX}*"):
        if stage.is_dir() and not stage.is_symlink():
            shutil.rmtree(stage, ignore_errors=True)


def _stage_judge_move(
    uv: _Uv,
    python: str,
    requirements: list[str],
    requested: list[Requested],
    resolve_args: Sequence[str],
    plan: Plan,
) -> list[tuple[str, str]]:
    target = probe(python)
    stage = Path(tempfile.mkdtemp(prefix=STAGE_PREFIX, dir=target.prefix))
    try:
        wanted = {canonicalize_name(r.distribution) for r in requested}
        pins = [pin for name, pin in plan.add.items() if name not in wanted and pin]
        exclusions = [a for i, a in enumerate(resolve_args) if _is_exclusion(resolve_args, i)]
        uv(
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
            ]
        )
        staged = _read_stage(stage, target, plan)
        problems = judge(staged, target, requested, set(plan.remove))
        if problems:
            raise ConfinementError(problems)
        if plan.remove:
            uv(["pip", "uninstall", "--python", python, *plan.remove])
        for item in staged:
            _move_into_place(item, target)
        return [(s.installs.distribution, s.installs.version) for s in staged]
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _is_exclusion(args: Sequence[str], index: int) -> bool:
    """``--excludes FILE`` pairs of the resolution arguments also hold while staging."""
    return args[index] == "--excludes" or (index > 0 and args[index - 1] == "--excludes")


@dataclass(frozen=True)
class _Uv:
    """Runs uv for one install, killed (SIGKILL) the moment the install's process dies: SIGKILL
    reaches only that process, and an orphaned uv would go on writing into a stage that the
    next install is removing. (Holding the install's lock in uv instead would hand it to every
    process uv starts, a build backend's daemon too, and block later installs for its life.)"""

    uv: str
    env: dict[str, str] | None

    def __call__(self, args: list[str]) -> str:
        argv, parent = guarded(uv_command(self.uv, *args), kill=True)
        env = {**(os.environ if self.env is None else self.env), **parent}
        result = subprocess.run(argv, capture_output=True, text=True, env=env)
        return _checked(result)


def _checked(result: subprocess.CompletedProcess[str]) -> str:
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip()[-3000:]
        if "source distributions is disabled" in detail or "no-build" in detail:
            detail += (
                "\n(dependencies install from wheels only, so no package's build code runs: "
                "install that package yourself first if you trust its build, then retry)"
            )
        raise InstallFailed(detail)
    return result.stderr + result.stdout


def _plan(uv: _Uv, python: str, args: list[str]) -> Plan:
    out = uv(["pip", "install", "--dry-run", "--python", python, "--no-build", *args])
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
    """Each planned distribution as staged: its RECORD sorted into site files, commands and data
    by where each file would really land in the target (``_sort_file``)."""
    purelib = stage / target.purelib.relative_to(target.prefix)
    dist_infos: dict[str, list[Path]] = {}
    for info in purelib.glob("*.dist-info"):
        dist_infos.setdefault(
            canonicalize_name(info.name[: -len(".dist-info")].rpartition("-")[0]), []
        ).append(info)
    staged: list[Staged] = []
    claimed: dict[Path, list[str]] = {}
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
        item = Staged(installs, name, [], [])
        for row in csv.reader(io.StringIO((info / "RECORD").read_text())):
            if not row:
                continue
            path = Path(os.path.normpath(purelib / row[0]))
            if stage not in path.parents:
                raise InstallFailed(f"{installs.distribution}'s RECORD names {row[0]!r} outside")
            claimed.setdefault(path, []).append(installs.distribution)
            item.files.append(path)
            item.relative.append(row[0])
            item.destinations.append(_sort_file(installs, row[0], target))
        staged.append(item)
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


def _sort_file(installs: Installs, relative: str, target: Target) -> Path:
    """File one staged path (``relative`` to site-packages, as RECORD names it) under where it
    really lands in the target, links in the target resolved: a site file (relative to the
    ``sys.path`` directory that would import it), a command, or data. Returns that place.

    A file never counts as data because of the way the wheel spelled its path: ``.data/data/
    lib64/python3.X/site-packages/x.pth`` is a site file in a virtualenv whose ``lib64`` links
    to ``lib``, and ``.data/platlib`` files are site files where platlib is a directory of its
    own."""
    real = real_destination(Path(os.path.normpath(target.purelib / relative)))
    directory = target.import_dir_of(real)
    if real in target.import_dirs:
        installs.import_roots.append(str(real))
    elif directory is not None:
        installs.site.append(real.relative_to(directory).as_posix())
    elif real.parent == target.scripts:
        installs.scripts.append(real.name)
    elif target.prefix in real.parents:
        installs.data.append(real.relative_to(target.prefix).as_posix())
    else:
        installs.outside.append(str(real))
    return real


def _move_into_place(item: Staged, target: Target) -> None:
    for path, rel in zip(item.files, item.relative, strict=True):
        dest = Path(os.path.normpath(target.purelib / rel))
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(path, dest)
        except OSError:
            shutil.copy2(path, dest)
