"""PEP 440 version bumps that rewrite only ``[project].version`` in pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal, get_args

from packaging.version import Version

Bump = Literal["major", "minor", "patch", "rc", "post"]
BUMPS: tuple[str, ...] = get_args(Bump)


def bump(version: str, kind: str) -> str:
    """The next version of ``kind``, always above ``version`` under PEP 440 (its epoch kept).

    major/minor/patch raise that part, or release the pre-release that already names it
    (1.2.4rc2 → 1.2.4 for a patch bump); ``rc`` starts or advances a release candidate: of the
    same release after an alpha or beta (1.2.3a1 → 1.2.3rc1), else of the next patch
    (1.2.3 → 1.2.4rc1 → 1.2.4rc2); ``post`` adds or advances a post-release (1.2.3 → 1.2.3.post1).
    """
    v = Version(version)
    epoch = f"{v.epoch}!" if v.epoch else ""
    major, minor, micro = [*v.release, 0, 0, 0][:3]
    unreleased = v.pre is not None or v.dev is not None
    if kind in ("major", "minor", "patch"):
        part = ("major", "minor", "patch").index(kind)
        base = (major, minor, micro)
        target = [*base[:part], base[part] + 1, 0, 0][:3]
        if unreleased and all(x == 0 for x in base[part + 1 :]):
            target = list(base)  # the pre-release of exactly this release: release it
        result = epoch + ".".join(map(str, target))
    elif kind == "rc":
        release = f"{major}.{minor}.{micro}"
        if v.pre is not None and v.pre[0] == "rc":
            result = f"{epoch}{release}rc{v.pre[1] + (0 if v.dev is not None else 1)}"
        elif unreleased:
            result = f"{epoch}{release}rc1"
        else:
            result = f"{epoch}{major}.{minor}.{micro + 1}rc1"
    elif kind == "post":
        pre = f"{v.pre[0]}{v.pre[1]}" if v.pre else ""
        result = f"{epoch}{major}.{minor}.{micro}{pre}.post{(v.post or 0) + 1}"
    else:
        raise ValueError(f"bump must be one of {', '.join(BUMPS)}, got {kind!r}")
    if Version(result) <= v:  # e.g. a release with more than three parts (1.2.3.4 → 1.2.4)
        raise ValueError(f"cannot bump {version} ({kind}): set the version by hand")
    return result


def read_project(path: Path) -> dict:
    data = tomllib.loads((path / "pyproject.toml").read_text())
    project = data.get("project")
    if not project or "name" not in project or "version" not in project:
        raise ValueError(
            f"{path / 'pyproject.toml'} needs [project] name and version (a static version)"
        )
    return project


def set_version(path: Path, new_version: str) -> None:
    """Rewrite the ``version = "..."`` line of the [project] table, nothing else."""
    file = path / "pyproject.toml"
    lines = file.read_text().splitlines(keepends=True)
    table = None
    for i, line in enumerate(lines):
        header = re.match(r"^\s*\[([^\]]+)\]\s*$", line)
        if header:
            table = header.group(1).strip()
            continue
        if table == "project" and re.match(r"^\s*version\s*=", line):
            lines[i] = re.sub(
                r'(=\s*)(["\']).*?\2',
                lambda m: f"{m.group(1)}{m.group(2)}{new_version}{m.group(2)}",
                line,
                count=1,
            )
            file.write_text("".join(lines))
            return
    raise ValueError(f"no version line in the [project] table of {file}")
