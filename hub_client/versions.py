"""PEP 440 version bumps that rewrite only ``[project].version`` in pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.version import Version

BUMPS = ("major", "minor", "patch", "rc", "post")


def bump(version: str, kind: str) -> str:
    """major/minor/patch as usual; ``rc`` starts or advances a release candidate of the next patch
    (1.2.3 → 1.2.4rc1 → 1.2.4rc2); ``post`` adds or advances a post-release (1.2.3 → 1.2.3.post1)."""
    v = Version(version)
    major, minor, micro = [*v.release, 0, 0, 0][:3]
    if kind == "major":
        return f"{major + 1}.0.0"
    if kind == "minor":
        return f"{major}.{minor + 1}.0"
    if kind == "patch":
        return f"{major}.{minor}.{micro}" if v.pre else f"{major}.{minor}.{micro + 1}"
    if kind == "rc":
        if v.pre and v.pre[0] == "rc":
            return f"{major}.{minor}.{micro}rc{v.pre[1] + 1}"
        return f"{major}.{minor}.{micro + 1}rc1"
    if kind == "post":
        base = f"{major}.{minor}.{micro}" + (f"{v.pre[0]}{v.pre[1]}" if v.pre else "")
        return f"{base}.post{(v.post or 0) + 1}"
    raise ValueError(f"bump must be one of {', '.join(BUMPS)}, got {kind!r}")


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
