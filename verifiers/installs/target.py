"""What a target Python already has, as an installer must respect it: who owns each file, each
importable top-level name and each command, and which modules its ``.pth`` files import.

Read from the outside (the target's ``sys.path`` and layout come from one short probe of its
interpreter; the ownership from the ``*.dist-info`` records on that path), so judging a package
never imports anything of the target's.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from importlib import machinery, metadata
from pathlib import Path

from packaging.utils import canonicalize_name

from verifiers.installs.confinement import ENTRY_POINT_GROUP, import_name, is_metadata_name
from verifiers.installs.interpreter import (
    ask as ask,  # moved (provenance asks too); this path stays
)
from verifiers.installs.provenance import read_records

_PROBE = """
import json, sys, sysconfig
paths = sysconfig.get_paths()
print(json.dumps({"prefix": sys.prefix, "purelib": paths["purelib"], "platlib": paths["platlib"],
    "scripts": paths["scripts"], "stdlib": paths["stdlib"], "platstdlib": paths["platstdlib"],
    "sys_path": [p for p in sys.path if p]}))
"""
_PTH_IMPORT = re.compile(
    r"(?:^|;)\s*(?:import|from)\s+([A-Za-z_][\w.]*)|__import__\(\s*['\"]([\w.]+)"
)


@dataclass
class Location:
    """Where a target answers ``import NAME``: the directory on ``sys.path``, the entry in it,
    and whether it is a namespace directory (no ``__init__``)."""

    target: Target = field(repr=False, compare=False)
    directory: Path
    entry: str
    namespace: bool

    @property
    def owner(self) -> str | None:
        """The distribution that owns the entry (None: nobody installed it)."""
        return self.target.owners()[1].get(self.directory / self.entry)


@dataclass
class Target:
    prefix: Path
    purelib: Path
    scripts: Path
    sys_path: list[Path]  # where other distributions' names live (the stdlib's are reserved)
    import_dirs: list[Path] = field(default_factory=list)  # every sys.path entry, deepest first
    names: dict[str, list[Location]] = field(default_factory=dict)
    startup_imports: set[str] = field(default_factory=set)
    _owners: tuple[dict[Path, str], dict[Path, str]] | None = field(default=None, repr=False)
    _environments: dict[str, str] | None = field(default=None, repr=False)

    def owners(self) -> tuple[dict[Path, str], dict[Path, str]]:
        """(file -> owner, sys.path entry -> owner), read from the RECORDs on first use: an
        install that touches nothing existing never pays for reading them."""
        if self._owners is None:
            self._owners = _read_owners(self)
        return self._owners

    def owner_of(self, path: Path) -> str | None:
        return self.owners()[0].get(Path(os.path.normpath(path)))

    def environments(self) -> dict[str, str]:
        """The installed distributions that are environments (canonical name -> what it is):
        those ``prime env install`` recorded as an owner's, and any that declares a
        ``verifiers.environments`` entry point. Read on first use."""
        if self._environments is None:
            self._environments = _read_environments(self)
        return self._environments

    def site_dirs(self) -> list[Path]:
        return [p for p in self.sys_path if p.is_dir()]

    def import_dir_of(self, real: Path) -> Path | None:
        """The entry of this Python's ``sys.path`` (stdlib included, and entries that do not
        exist yet) that a file at the resolved path ``real`` would be imported from, or None."""
        return next((d for d in self.import_dirs if d in real.parents), None)


def real_destination(path: Path) -> Path:
    """Where a file written at ``path`` really lands: the links among its existing ancestors
    resolved (a virtualenv's ``lib64 -> lib`` takes ``lib64/python3.X/site-packages/x.pth``
    into site-packages)."""
    existing, rest = path.parent, [path.name]
    while not os.path.lexists(existing) and existing != existing.parent:
        rest.append(existing.name)
        existing = existing.parent
    return existing.resolve().joinpath(*reversed(rest))


def probe(python: str) -> Target:
    """The target's layout and everything installed on its path."""
    try:
        out = ask(python, _PROBE, check=True).stdout
        info = json.loads(out)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise RuntimeError(f"could not ask {python} where it installs packages: {exc}") from exc
    stdlib = {Path(info["stdlib"]).resolve(), Path(info["platstdlib"]).resolve()}
    sys_path, import_dirs = [], []
    for entry in [*info["sys_path"], info["purelib"], info["platlib"]]:
        path = Path(entry).resolve()
        import_dirs.append(path)  # one that does not exist yet (lib/python3XY.zip) counts too
        in_stdlib = path in stdlib or (
            path.parent in stdlib and path.name not in ("site-packages", "dist-packages")
        )
        if path.is_dir() and not in_stdlib:  # the stdlib's names are reserved by name
            sys_path.append(path)
    target = Target(
        prefix=Path(info["prefix"]).resolve(),
        purelib=Path(info["purelib"]).resolve(),
        scripts=Path(info["scripts"]).resolve(),
        sys_path=list(dict.fromkeys(sys_path)),
        import_dirs=sorted(set(import_dirs), key=lambda d: len(d.parts), reverse=True),
    )
    _read_names(target)
    for directory in target.site_dirs():
        for pth in sorted(directory.glob("*.pth")):
            target.startup_imports |= pth_imports(pth)
    return target


def _read_owners(target: Target) -> tuple[dict[Path, str], dict[Path, str]]:
    """Who owns each file and each top-level entry of the target's ``sys.path`` (RECORDs read
    as plain text: a large environment has tens of thousands of files)."""
    roots = sorted((str(p) for p in target.sys_path), key=len, reverse=True)
    file_owner: dict[str, str] = {}
    entry_owner: dict[str, str] = {}
    seen: set[str] = set()
    for dist in metadata.distributions(path=[str(p) for p in target.sys_path]):
        name = canonicalize_name(dist.metadata["Name"] or "")
        if not name or name in seen:
            continue  # the first one on sys.path is the one that imports
        seen.add(name)
        base = str(dist.locate_file(""))
        for row in csv.reader(io.StringIO(dist.read_text("RECORD") or "")):
            if not row:
                continue
            path = os.path.normpath(os.path.join(base, row[0]))
            file_owner.setdefault(path, name)
            for root in roots:
                if path.startswith(root + os.sep):
                    entry = path[len(root) + 1 :].split(os.sep, 1)[0]
                    entry_owner.setdefault(os.path.join(root, entry), name)
                    if path.endswith(".pth") and os.path.dirname(path) == root:
                        for editable in _pth_roots(Path(path)):  # its project's entries are its own
                            for child in _entries(editable):
                                entry_owner.setdefault(str(editable / child), name)
                    break
    return (
        {Path(k): v for k, v in file_owner.items()},
        {Path(k): v for k, v in entry_owner.items()},
    )


def _read_environments(target: Target) -> dict[str, str]:
    found: dict[str, str] = {}
    for dist in metadata.distributions(path=[str(p) for p in target.sys_path]):
        name = canonicalize_name(dist.metadata["Name"] or "")
        if name and name not in found and any(
            point.group == ENTRY_POINT_GROUP for point in dist.entry_points
        ):
            found[name] = f"the environment {name} {dist.version}"
    for key, record in read_records(str(target.prefix)).items():
        owner, env, version = record.get("owner"), record.get("name"), record.get("version")
        found[canonicalize_name(key)] = f"the hub environment {owner}/{env} {version}"
    return found


def _read_names(target: Target) -> None:
    for directory in target.sys_path:
        for entry in _entries(directory):
            path = directory / entry
            if not importable(path):
                continue
            namespace = path.is_dir() and not any(
                child.name.startswith("__init__.") for child in path.iterdir()
            )
            target.names.setdefault(import_name(entry), []).append(
                Location(target, directory, entry, namespace)
            )


def _entries(directory: Path) -> list[str]:
    """The entries of a ``sys.path`` directory that can answer an import."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(
        n
        for n in names
        if not is_metadata_name(n)
        and not n.lower().endswith(".pth")
        and n != "__pycache__"
        and not n.startswith(".")
    )


def importable(path: Path) -> bool:
    """Whether a directory entry on ``sys.path`` can answer an import."""
    if path.name.startswith(".") or is_metadata_name(path.name):
        return False
    if path.is_dir():
        return path.name.isidentifier()
    return any(path.name.endswith(suffix) for suffix in machinery.all_suffixes())


def _pth_roots(pth: Path) -> list[Path]:
    """Directories a ``.pth`` file puts on ``sys.path`` (its path lines)."""
    roots = []
    try:
        lines = pth.read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        line = line.strip()
        if line and not line.startswith(("#", "import ", "import\t")):
            path = Path(line if os.path.isabs(line) else pth.parent / line)
            if path.is_dir():
                roots.append(path.resolve())
    return roots


def pth_imports(pth: Path) -> set[str]:
    """Top-level modules a ``.pth`` file imports at every interpreter start."""
    try:
        text = pth.read_text(errors="replace")
    except OSError:
        return set()
    found = set()
    for line in text.splitlines():
        if line.startswith(("import ", "import\t")):
            for match in _PTH_IMPORT.finditer(line):
                found.add((match.group(1) or match.group(2)).split(".")[0])
    return found
