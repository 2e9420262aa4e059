"""Inspecting and extracting package archives without trusting them.

Used by the server (validating uploads) and the client (``prime env pull``). Rejects absolute
paths, ``..`` components, symlinks and hard links, device files, oversized or too many members,
and absurd compression ratios (zip bombs), before anything touches the disk.
"""

from __future__ import annotations

import configparser
import io
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.metadata import parse_email

from verifiers.installs.confinement import (
    Installs,
    is_own_metadata_dir,
    layout_problems,
    top_level_names,
)
from verifiers.installs.content_hash import content_hash

MAX_MEMBERS = 10_000
MAX_UNPACKED = 256 * 1024 * 1024
MAX_RATIO = 100


class UnsafeArchiveError(ValueError):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass
class PackageMetadata:
    name: str
    version: str
    summary: str | None
    requires_python: str | None
    requires_dist: list[str]
    raw: bytes  # the METADATA / PKG-INFO file as uploaded (served for PEP 658)
    # what a wheel installs at the top of site-packages, and the entry points it declares
    top_level: list[str] = field(default_factory=list)
    entry_points: dict[str, dict[str, str]] = field(default_factory=dict)


def safe_member_name(name: str) -> str:
    path = PurePosixPath(name.replace("\\", "/"))
    if not path.parts or path.parts == (".",):
        raise UnsafeArchiveError("unsafe_path", f"archive member {name!r} names the archive root")
    if (
        not name
        or path.is_absolute()
        or any(part in ("..", "") for part in path.parts[:-1])
        or ".." in path.parts
    ):
        raise UnsafeArchiveError("unsafe_path", f"archive member {name!r} escapes the archive root")
    if ":" in path.parts[0]:
        raise UnsafeArchiveError("unsafe_path", f"archive member {name!r} has a drive prefix")
    return str(path)


def parse_metadata(raw: bytes) -> PackageMetadata:
    """Core metadata (``METADATA`` / ``PKG-INFO``) read by ``packaging.metadata``."""
    fields, _ = parse_email(raw)
    name, version = fields.get("name"), fields.get("version")
    if not name or not version:
        raise UnsafeArchiveError("invalid_metadata", "package metadata has no Name or Version")
    return PackageMetadata(
        name=name.strip(),
        version=version.strip(),
        summary=fields.get("summary"),
        requires_python=fields.get("requires_python"),
        requires_dist=list(fields.get("requires_dist") or []),
        raw=raw,
    )


def _check_totals(count: int, unpacked: int, packed: int) -> None:
    if count > MAX_MEMBERS:
        raise UnsafeArchiveError(
            "too_many_files", f"archive has {count} members (limit {MAX_MEMBERS})"
        )
    if unpacked > MAX_UNPACKED:
        raise UnsafeArchiveError(
            "too_large", f"archive unpacks to {unpacked} bytes (limit {MAX_UNPACKED})"
        )
    if packed and unpacked / packed > MAX_RATIO and unpacked > 1024 * 1024:
        raise UnsafeArchiveError(
            "compression_ratio",
            f"archive expands {unpacked / packed:.0f}x (limit {MAX_RATIO}x): refusing a possible zip bomb",
        )


def inspect_wheel(data: bytes) -> tuple[PackageMetadata, str]:
    """(metadata, content hash) of a wheel, or UnsafeArchiveError. The hash is
    ``verifiers.installs.content_hash`` over the files the wheel installs: what vf-eval records.

    The wheel must have one metadata directory and install nothing but its own modules
    (``verifiers.installs.confinement``, held to an environment's rules), whichever scheme of
    the wheel a file arrives through."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except zipfile.BadZipFile as exc:
        raise UnsafeArchiveError("invalid_archive", f"not a valid wheel (zip): {exc}") from exc
    _check_totals(len(infos), sum(i.file_size for i in infos), len(data))
    names = [safe_member_name(i.filename) for i in infos]
    if len(set(names)) != len(names):
        duplicate = next(n for n in names if names.count(n) > 1)
        raise UnsafeArchiveError(
            "duplicate_member", f"wheel has {duplicate!r} more than once (which one installs?)"
        )
    for info, name in zip(infos, names, strict=True):
        mode = info.external_attr >> 16
        if mode and (mode & 0o170000) not in (0o100000, 0o040000, 0):
            raise UnsafeArchiveError(
                "unsafe_member", f"wheel member {name!r} is not a regular file (symlink or device)"
            )
    metadata_dir = _metadata_dir(names)
    files = {
        name: archive.read(info)
        for info, name in sorted(zip(infos, names, strict=True), key=lambda pair: pair[1])
        if not info.is_dir()
    }
    if f"{metadata_dir}/METADATA" not in files:
        raise UnsafeArchiveError("invalid_metadata", f"wheel has no {metadata_dir}/METADATA")
    meta = parse_metadata(files[f"{metadata_dir}/METADATA"])
    if not is_own_metadata_dir(metadata_dir, meta.name, meta.version):
        raise UnsafeArchiveError(
            "metadata_mismatch",
            f"the wheel's {metadata_dir} does not name its metadata ({meta.name} {meta.version})",
        )
    installs = Installs(meta.name, meta.version, metadata_dir)
    installed_files: list[tuple[str, bytes]] = []
    for name, content in files.items():
        scheme, path = _scheme_of(name, metadata_dir)
        if scheme == "site":
            installs.site.append(path)
            installed_files.append((path, content))
        elif scheme == "scripts":
            installs.scripts.append(PurePosixPath(path).name)
        elif scheme == "data":
            installs.data.append(path)
    installs.entry_points = parse_entry_points(files.get(f"{metadata_dir}/entry_points.txt", b""))
    problems = layout_problems(installs, environment=True)
    if problems:
        raise UnsafeArchiveError(problems[0].code, problems[0].message)
    meta.top_level = top_level_names(installs.site, metadata_dir)
    meta.entry_points = installs.entry_points
    return meta, content_hash(installed_files)


def _metadata_dir(names: list[str]) -> str:
    """The wheel's one top-level ``*.dist-info`` directory (a second one is refused)."""
    found = sorted({n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")})
    if not found:
        raise UnsafeArchiveError("invalid_metadata", "wheel has no *.dist-info/METADATA")
    if len(found) > 1:
        raise UnsafeArchiveError(
            "extra_metadata",
            f"wheel has {len(found)} metadata directories ({', '.join(found)}); a wheel has one",
        )
    return found[0]


def _scheme_of(member: str, metadata_dir: str) -> tuple[str, str]:
    """Where a wheel member lands: ("metadata", ...), ("site", path relative to site-packages),
    ("scripts", name) or ("data", path relative to the prefix, for data and headers)."""
    first, _, rest = member.partition("/")
    if first == metadata_dir:
        return "metadata", rest
    if first.endswith(".data") and rest:
        kind, _, path = rest.partition("/")
        if kind in ("purelib", "platlib") and path:
            return "site", path
        if kind == "scripts" and path:
            return "scripts", path
        if kind in ("data", "headers") and path:
            return "data", path
        raise UnsafeArchiveError(
            "data_scheme", f"wheel member {member!r} is in no scheme a wheel may install into"
        )
    return "site", member


class _CaseKeepingParser(configparser.ConfigParser):
    """Entry point names keep their case (configparser lowercases keys by default)."""

    def optionxform(self, optionstr: str) -> str:
        return optionstr


def parse_entry_points(raw: bytes) -> dict[str, dict[str, str]]:
    """``entry_points.txt`` as {group: {name: value}}; an unparsable file is an error."""
    if not raw.strip():
        return {}
    parser = _CaseKeepingParser(delimiters=("=",), interpolation=None)
    try:
        parser.read_string(raw.decode("utf-8"))
    except (configparser.Error, UnicodeDecodeError) as exc:
        raise UnsafeArchiveError(
            "invalid_metadata", f"entry_points.txt does not parse: {exc}"
        ) from exc
    return {group: dict(parser[group]) for group in parser.sections()}


def inspect_sdist(data: bytes) -> PackageMetadata:
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
        members = archive.getmembers()
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UnsafeArchiveError("invalid_archive", f"not a valid sdist (tar.gz): {exc}") from exc
    _check_totals(len(members), sum(m.size for m in members), len(data))
    pkg_info = None
    for member in members:
        name = safe_member_name(member.name)
        if member.issym() or member.islnk():
            raise UnsafeArchiveError("unsafe_member", f"sdist member {name!r} is a link")
        if not (member.isfile() or member.isdir()):
            raise UnsafeArchiveError(
                "unsafe_member", f"sdist member {name!r} is not a regular file"
            )
        if member.isfile() and name.count("/") == 1 and name.endswith("/PKG-INFO"):
            pkg_info = _member_bytes(archive, member)
    if pkg_info is None:
        raise UnsafeArchiveError("invalid_metadata", "sdist has no top-level PKG-INFO")
    return parse_metadata(pkg_info)


def extract_sdist(data: bytes, target: Path) -> tuple[Path, list[str]]:
    """Extract a checked sdist into a fresh ``target/<root>``; returns (root, skipped dotfiles).

    Everything lands in the sdist's single root directory, which must not exist yet; members with
    a dot-named component (``.bashrc``, ``.ssh/...``, ``.git/...``) are never written.
    """
    inspect_sdist(data)
    target = target.resolve()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        members = archive.getmembers()
        roots = {PurePosixPath(safe_member_name(m.name)).parts[0] for m in members}
        if len(roots) != 1:
            raise UnsafeArchiveError(
                "unsafe_path", f"an sdist has one root directory; this one has {sorted(roots)}"
            )
        (root_name,) = roots
        if root_name.startswith("."):
            raise UnsafeArchiveError(
                "unsafe_path", f"the sdist's root {root_name!r} is a dot-directory"
            )
        root = target / root_name
        if root.exists():
            raise UnsafeArchiveError(
                "target_exists", f"{root} already exists; pull into a fresh directory"
            )
        skipped: list[str] = []
        for member in members:
            relative = PurePosixPath(safe_member_name(member.name))
            if any(part.startswith(".") for part in relative.parts):
                if not member.isdir():
                    skipped.append(str(relative))
                continue
            dest = (target / relative).resolve()
            if target not in dest.parents and dest != target:
                raise UnsafeArchiveError(
                    "unsafe_path", f"{member.name!r} would land outside {target}"
                )
            if member.isdir():
                dest.mkdir(parents=True, exist_ok=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                with open(dest, "xb") as out:  # never replaces a file (or follows a planted link)
                    out.write(_member_bytes(archive, member))
    return root, skipped


def _member_bytes(archive: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    """A regular file's bytes (``extractfile`` gives None for anything else)."""
    stream = archive.extractfile(member)
    if stream is None:
        raise UnsafeArchiveError("unsafe_member", f"sdist member {member.name!r} is not a file")
    with stream:
        return stream.read()
