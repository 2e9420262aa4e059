"""Inspecting and extracting package archives without trusting them.

Used by the server (validating uploads) and the client (``prime env pull``). Rejects absolute
paths, ``..`` components, control characters in names, symlinks and hard links, device files,
a member twice or a file that is also a directory, oversized or too many members, and absurd
compression ratios (zip bombs), before anything touches the disk. A wheel's zip must read the
same way to every reader (``hub_protocol.zip_layout``); an sdist holds one top directory,
``<normalized name>-<version>/`` as ``uv build`` makes it; a source archive (what Prime's official
CLI pushes beside its wheel) is a flat tar.gz of the project directory, held to the same member
rules and extracted into such a directory of its own. Whatever a broken archive makes the
decoders raise is an ``UnsafeArchiveError`` with a code, never another exception. Metadata must
parse the way installers parse it (names, ``Requires-Dist``, ``Requires-Python``, entry points).

Over 400 lines, not split: wheels, sdists and source archives share the member-name rules, the decoder guard
and the metadata parse, and every refusal is the one ``UnsafeArchiveError``; the zip's layout,
which needs none of them, is a module of its own.
"""

from __future__ import annotations

import configparser
import io
import lzma
import os
import re
import shutil
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from packaging.metadata import parse_email
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from hub_protocol.zip_layout import ZipLayoutError, check_layout
from verifiers.installs.confinement import (
    Installs,
    is_own_metadata_dir,
    layout_problems,
    top_level_names,
)
from verifiers.installs.content_hash import content_hash
from verifiers.processes.leftovers import STAGING, remove_abandoned, staging_dir

MAX_MEMBERS = 10_000
MAX_UNPACKED = 256 * 1024 * 1024
MAX_RATIO = 100


PROJECT_NAME = re.compile(r"[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9]", re.IGNORECASE)  # PEP 508
# what a corrupt or hostile archive makes zipfile, tarfile and their decompressors raise
DECODER_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    tarfile.TarError,
    ZipLayoutError,
    zlib.error,
    lzma.LZMAError,
    struct.error,
    EOFError,
    OSError,
    NotImplementedError,
    RuntimeError,
    UnicodeError,
    ValueError,
)
INSTALLER_FIELDS = ("name", "version", "requires_dist", "requires_python")
# an entry point's value as importlib.metadata reads it: module, attribute, extras
OBJECT_REFERENCE = re.compile(r"[\w.]+\s*(:\s*[\w.]+\s*)?(\[[\w.,\s-]*\]\s*)?")


class UnsafeArchiveError(ValueError):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@contextmanager
def _decoding(kind: str) -> Iterator[None]:
    """Whatever the archive makes its decoders raise becomes ``invalid_archive``."""
    try:
        yield
    except UnsafeArchiveError:
        raise
    except DECODER_ERRORS as exc:
        raise UnsafeArchiveError("invalid_archive", f"not a valid {kind}: {exc}") from exc


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
    """``name`` normalized (``a//b``, ``a/./b`` and ``a/b/`` are ``a/b``), or UnsafeArchiveError
    for a name that escapes the root or holds a character that is not printable (a newline
    splits a RECORD line; installers refuse them)."""
    hidden = next((c for c in name if not (c.isprintable() or c == " ")), None)
    if hidden is not None:
        raise UnsafeArchiveError(
            "unsafe_path",
            f"archive member {name!r} has a control or invisible character (U+{ord(hidden):04X})",
        )
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
    """Core metadata (``METADATA`` / ``PKG-INFO``) read by ``packaging.metadata``, held to what
    installers need to parse: a PEP 508 name, and every ``Requires-Dist`` and
    ``Requires-Python`` parsing as a requirement and a specifier (uv refuses the whole file
    otherwise, and the hub serves this file to installers as PEP 658 metadata)."""
    fields, unparsed = parse_email(raw)
    broken = [key for key in INSTALLER_FIELDS if key in unparsed]
    if broken:
        raise UnsafeArchiveError(
            "invalid_metadata", f"package metadata: {', '.join(broken)} does not parse"
        )
    name, version = fields.get("name"), fields.get("version")
    if not name or not version:
        raise UnsafeArchiveError("invalid_metadata", "package metadata has no Name or Version")
    if not PROJECT_NAME.fullmatch(name.strip()):
        raise UnsafeArchiveError("invalid_metadata", f"Name {name[:100]!r} is not a PEP 508 name")
    requires_dist = list(fields.get("requires_dist") or [])
    requires_python = fields.get("requires_python")
    try:
        for line in requires_dist:
            Requirement(line)
        if requires_python is not None:
            SpecifierSet(requires_python)
    except (InvalidRequirement, InvalidSpecifier) as exc:
        raise UnsafeArchiveError(
            "invalid_metadata", f"package metadata does not parse as installers read it: {exc}"
        ) from None
    return PackageMetadata(
        name=name.strip(),
        version=version.strip(),
        summary=fields.get("summary"),
        requires_python=requires_python,
        requires_dist=requires_dist,
        raw=raw,
    )


def sdist_root(name: str, version: str) -> str:
    """The one top directory of an sdist, as ``uv build`` names it (PEP 625):
    ``<normalized name>-<version>``, with ``_`` for ``-``."""
    try:
        normalized = str(Version(version))
    except InvalidVersion:
        raise UnsafeArchiveError(
            "invalid_metadata", f"Version {version[:100]!r} is not a PEP 440 version"
        ) from None
    return f"{canonicalize_name(name).replace('-', '_')}-{normalized}"


def _check_members(kind: str, members: list[tuple[str, bool]]) -> None:
    """Each (normalized name, is a directory) once, and no file that is also a directory
    (``x`` and ``x/y``): an extractor or installer meets the second one as an error, or writes
    one over the other."""
    seen: set[str] = set()
    files = {name for name, is_dir in members if not is_dir}
    for name, _ in members:
        if name in seen:
            raise UnsafeArchiveError(
                "duplicate_member", f"{kind} has {name!r} more than once (which one is it?)"
            )
        seen.add(name)
        parent = PurePosixPath(name).parent
        while parent != PurePosixPath("."):
            if str(parent) in files:
                raise UnsafeArchiveError(
                    "duplicate_member",
                    f"{kind} has {str(parent)!r} as a file and as the directory of {name!r}",
                )
            parent = parent.parent


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
    files = _wheel_files(data)
    metadata_dir = _metadata_dir(list(files))
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


def _wheel_files(data: bytes) -> dict[str, bytes]:
    """The wheel's files by normalized name, sorted, once its members and layout are checked."""
    with _decoding("wheel (zip)"):
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
        _check_totals(len(infos), sum(i.file_size for i in infos), len(data))
        names = [safe_member_name(i.orig_filename) for i in infos]
        _check_members("wheel", [(n, i.is_dir()) for n, i in zip(names, infos, strict=True)])
        for info, name in zip(infos, names, strict=True):
            mode = info.external_attr >> 16
            if mode and (mode & 0o170000) not in (0o100000, 0o040000, 0):
                raise UnsafeArchiveError(
                    "unsafe_member",
                    f"wheel member {name!r} is not a regular file (symlink or device)",
                )
        check_layout(data, archive)
        return {
            name: archive.read(info)
            for info, name in sorted(zip(infos, names, strict=True), key=lambda pair: pair[1])
            if not info.is_dir()
        }


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
    entry_points = {group: dict(parser[group]) for group in parser.sections()}
    for group, entries in entry_points.items():
        for name, value in entries.items():
            if not (name.isprintable() and OBJECT_REFERENCE.fullmatch(value.strip())):
                raise UnsafeArchiveError(
                    "invalid_metadata",
                    f"entry point {name!r} = {value!r} in [{group}] is not a name and an object "
                    "reference (module:attr) as installers read it",
                )
    return entry_points


def inspect_sdist(data: bytes) -> PackageMetadata:
    """The sdist's metadata once every member is checked: regular files and directories only,
    each once, all inside one top directory named as ``uv build`` names it (``sdist_root``),
    so ``prime env pull`` extracts into ``DIR/<name>-<version>/`` and nowhere else."""
    with _decoding("sdist (tar.gz)"):
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
        members = archive.getmembers()
        _check_totals(len(members), sum(m.size for m in members), len(data))
        names = [_sdist_member_name(member) for member in members]
        _check_members("sdist", [(n, m.isdir()) for n, m in zip(names, members, strict=True)])
        roots = sorted({PurePosixPath(name).parts[0] for name in names})
        if len(roots) != 1:
            raise UnsafeArchiveError(
                "unsafe_path", f"an sdist has one top directory; this one has {roots[:5]}"
            )
        root = roots[0]
        pkg_info = next(
            (m for m, n in zip(members, names, strict=True) if n == f"{root}/PKG-INFO"), None
        )
        if pkg_info is None or not pkg_info.isfile():
            raise UnsafeArchiveError("invalid_metadata", f"sdist has no {root}/PKG-INFO")
        raw = _member_bytes(archive, pkg_info)
    meta = parse_metadata(raw)
    expected = sdist_root(meta.name, meta.version)
    if root != expected:
        raise UnsafeArchiveError(
            "metadata_mismatch",
            f"the sdist's top directory is {root!r}, not {expected!r} (<normalized name>-"
            "<version>, as uv build names it)",
        )
    return meta


def _sdist_member_name(member: tarfile.TarInfo) -> str:
    name = safe_member_name(member.name)
    if member.issym() or member.islnk():
        raise UnsafeArchiveError("unsafe_member", f"sdist member {name!r} is a link")
    if not (member.isfile() or member.isdir()):
        raise UnsafeArchiveError("unsafe_member", f"sdist member {name!r} is not a regular file")
    return name


def extract_sdist(data: bytes, target: Path) -> tuple[Path, list[str]]:
    """Extract a checked sdist into a fresh ``target/<name>-<version>``; returns (that root,
    skipped dotfiles).

    Everything lands in the sdist's one top directory (``inspect_sdist``), which must not exist
    yet; members with a dot-named component (``.bashrc``, ``.ssh/...``, ``.git/...``) are never
    written. The files are written into a hidden staging directory beside it and moved into
    place at once, so a pull that fails (a full disk, names that collide on a case-insensitive
    filesystem) leaves nothing behind; one killed outright (SIGKILL runs no cleanup) leaves its
    staging directory, which the next pull into ``target`` removes.
    """
    meta = inspect_sdist(data)
    return _extract_into(data, target, sdist_root(meta.name, meta.version), flat=False)


def inspect_source(data: bytes) -> None:
    """Check a source archive (a flat tar.gz of a project directory, as Prime's official CLI
    pushes it: no top directory, no PKG-INFO) member by member, as an sdist is checked."""
    with _decoding("source archive (tar.gz)"):
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
        members = archive.getmembers()
        _check_totals(len(members), sum(m.size for m in members), len(data))
        names = [_sdist_member_name(member) for member in members]
        _check_members(
            "source archive", list(zip(names, [m.isdir() for m in members], strict=True))
        )
        if not any(m.isfile() for m in members):
            raise UnsafeArchiveError("invalid_source", "the source archive holds no file")


def source_readme(data: bytes, limit: int) -> str | None:
    """The top-level ``README.md`` of a checked source archive (what the official client's push
    carries instead of the native push's ``readme`` field), at most ``limit`` bytes; None when
    there is none or it is larger."""
    with _decoding("source archive (tar.gz)"):
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
        for member in archive.getmembers():
            if member.isfile() and _sdist_member_name(member) in ("README.md", "./README.md"):
                if member.size > limit:
                    return None
                file = archive.extractfile(member)
                return None if file is None else file.read(limit).decode("utf-8", "replace")
    return None


def extract_source(data: bytes, target: Path, name: str, version: str) -> tuple[Path, list[str]]:
    """Extract a checked source archive into a fresh ``target/<name>-<version>`` (the directory
    an sdist of that version extracts into), as ``extract_sdist`` does."""
    inspect_source(data)
    return _extract_into(data, target, sdist_root(name, version), flat=True)


def _extract_into(data: bytes, target: Path, root_name: str, flat: bool) -> tuple[Path, list[str]]:
    """Extract into a fresh ``target/root_name`` through a staging directory (``flat``: the
    members are relative to that root, not inside a top directory of that name)."""
    target = target.resolve()
    root = target / root_name
    if root.exists():
        raise UnsafeArchiveError(
            "target_exists", f"{root} already exists; pull into a fresh directory"
        )
    remove_abandoned_staging(target)
    staging = staging_dir(root.name, target)
    try:
        base = staging / root.name if flat else staging
        skipped = _extract_members(data, base, staging / root.name)
        if root.exists():
            raise UnsafeArchiveError("target_exists", f"{root} appeared while pulling")
        os.rename(staging / root.name, root)
    except OSError as exc:
        raise UnsafeArchiveError(
            "extract_failed", f"could not extract into {root}: {exc}"
        ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return root, skipped


def remove_abandoned_staging(target: Path) -> list[Path]:
    """Remove the staging directories that pulls into ``target`` left when they were killed:
    ours, and their process gone (``verifiers.processes.leftovers``). Returns them."""
    return remove_abandoned(target, STAGING)


def _extract_members(data: bytes, base: Path, root: Path) -> list[str]:
    """Write the sdist's members under ``base`` (all inside ``root``); the skipped dotfiles."""
    skipped: list[str] = []
    root.mkdir()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            relative = PurePosixPath(safe_member_name(member.name))
            if any(part.startswith(".") for part in relative.parts):
                if not member.isdir():
                    skipped.append(str(relative))
                continue
            dest = (base / relative).resolve()
            if root not in dest.parents and dest != root:
                raise UnsafeArchiveError(
                    "unsafe_path", f"{member.name!r} would land outside {root.name}"
                )
            if member.isdir():
                dest.mkdir(parents=True, exist_ok=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                with open(dest, "xb") as out:  # never replaces a file (or follows a planted link)
                    out.write(_member_bytes(archive, member))
    return skipped


def _member_bytes(archive: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    """A regular file's bytes (``extractfile`` gives None for anything else)."""
    stream = archive.extractfile(member)
    if stream is None:
        raise UnsafeArchiveError("unsafe_member", f"sdist member {member.name!r} is not a file")
    with stream:
        return stream.read()
