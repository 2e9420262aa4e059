"""Inspecting and extracting package archives without trusting them.

Used by the server (validating uploads) and the client (``prime env pull``). Rejects absolute
paths, ``..`` components, symlinks and hard links, device files, oversized or too many members,
and absurd compression ratios (zip bombs), before anything touches the disk.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path, PurePosixPath

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


def safe_member_name(name: str) -> str:
    path = PurePosixPath(name.replace("\\", "/"))
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
    headers = HeaderParser().parsestr(raw.decode("utf-8", "replace"))
    name, version = headers.get("Name"), headers.get("Version")
    if not name or not version:
        raise UnsafeArchiveError("invalid_metadata", "package metadata has no Name or Version")
    return PackageMetadata(
        name=name.strip(),
        version=version.strip(),
        summary=headers.get("Summary"),
        requires_python=headers.get("Requires-Python"),
        requires_dist=headers.get_all("Requires-Dist") or [],
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
    """(metadata, canonical content hash) of a wheel, or UnsafeArchiveError."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = archive.infolist()
    except zipfile.BadZipFile as exc:
        raise UnsafeArchiveError("invalid_archive", f"not a valid wheel (zip): {exc}") from exc
    _check_totals(len(infos), sum(i.file_size for i in infos), len(data))
    metadata_raw = None
    digest = hashlib.sha256()
    for info in sorted(infos, key=lambda i: i.filename):
        name = safe_member_name(info.filename)
        mode = info.external_attr >> 16
        if mode and (mode & 0o170000) not in (0o100000, 0o040000, 0):
            raise UnsafeArchiveError(
                "unsafe_member", f"wheel member {name!r} is not a regular file (symlink or device)"
            )
        if info.is_dir():
            continue
        content = archive.read(info)
        if name.count("/") == 1 and name.endswith(".dist-info/METADATA"):
            metadata_raw = content
        if not name.endswith(".dist-info/RECORD"):
            digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
    if metadata_raw is None:
        raise UnsafeArchiveError("invalid_metadata", "wheel has no *.dist-info/METADATA")
    return parse_metadata(metadata_raw), "sha256:" + digest.hexdigest()


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
        if name.count("/") == 1 and name.endswith("/PKG-INFO"):
            pkg_info = archive.extractfile(member).read()
    if pkg_info is None:
        raise UnsafeArchiveError("invalid_metadata", "sdist has no top-level PKG-INFO")
    return parse_metadata(pkg_info)


def extract_sdist(data: bytes, target: Path) -> Path:
    """Extract a checked sdist under ``target`` (nothing can land outside it); returns its root."""
    inspect_sdist(data)
    target = target.resolve()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            dest = (target / safe_member_name(member.name)).resolve()
            if target not in dest.parents and dest != target:
                raise UnsafeArchiveError(
                    "unsafe_path", f"{member.name!r} would land outside {target}"
                )
            if member.isdir():
                dest.mkdir(parents=True, exist_ok=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(archive.extractfile(member).read())
    roots = {
        PurePosixPath(m).parts[0]
        for m in tarfile.open(fileobj=io.BytesIO(data), mode="r:gz").getnames()
    }
    return target / sorted(roots)[0]
