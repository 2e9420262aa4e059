"""Publishing a version: check the uploaded archives, store their blobs, then one transaction.

Runs in a worker thread (archive checks, hashing, fsyncs and database writes never run on the
event loop). The filenames are parsed by ``packaging.utils``; the package rules (what a wheel may
install) are ``hub_protocol.archives`` and ``hub_server.services.package_rules``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from typing import BinaryIO

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from hub_protocol.archives import (
    UnsafeArchiveError,
    inspect_sdist,
    inspect_source,
    inspect_wheel,
    sdist_root,
    source_readme,
)
from hub_server.background.upload_pool import Upload
from hub_server.db.blobs import file_sha256
from hub_server.db.catalog import NewVersion, StoredFile
from hub_server.errors import HubError
from hub_server.services.auth import Principal
from hub_server.services.hub import Hub
from hub_server.services.names import check_text, normalize_version
from hub_server.services.package_rules import entry_point_problem, top_level_problem
from hub_server.settings import MAX_FIELD

SAFE_FILENAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}\.(?:whl|tar\.gz)")


@dataclass
class PublishForm:
    visibility: str | None
    readme: str | None
    description: str | None
    tags: list[str]


def _check_filenames(wheel: Upload, sdist: Upload | None) -> tuple[str, Version]:
    for upload in (wheel, sdist):
        if upload is not None and not SAFE_FILENAME.fullmatch(upload.filename):
            raise HubError(
                400,
                "invalid_filename",
                f"{upload.filename[:100]!r}: package filenames are letters, digits, '.', '_', "
                "'-', '+' (at most 200 before the extension)",
            )
    try:
        name, version, _, _ = parse_wheel_filename(wheel.filename)
        if sdist is not None:
            sdist_name, _ = parse_sdist_filename(sdist.filename)
            if sdist_name != name:
                raise HubError(
                    400, "invalid_filename", f"{sdist.filename!r} is not this package's sdist"
                )
    except (InvalidWheelFilename, InvalidSdistFilename) as exc:
        raise HubError(400, "invalid_filename", f"not a valid package filename: {exc}") from None
    return name, version


def _inspect(
    wheel_data: bytes, sdist_data: bytes | None, wheel: Upload, in_file: tuple[str, Version]
):
    try:
        meta, content_hash = inspect_wheel(wheel_data)
        sdist_meta = inspect_sdist(sdist_data) if sdist_data is not None else None
    except UnsafeArchiveError as exc:
        raise HubError(400, exc.code, str(exc)) from exc
    version = normalize_version(meta.version)
    if Version(version).local is not None:
        raise HubError(
            400,
            "local_version",
            f"{meta.version!r} is a local version (+...): local versions cannot be published",
        )
    name_in_file, version_in_file = in_file
    if name_in_file != canonicalize_name(meta.name) or version_in_file != Version(version):
        raise HubError(
            400,
            "metadata_mismatch",
            f"wheel filename {wheel.filename!r} does not match its metadata ({meta.name} {meta.version})",
        )
    if sdist_meta is not None and (
        canonicalize_name(sdist_meta.name) != canonicalize_name(meta.name)
        or Version(sdist_meta.version) != Version(version)
    ):
        raise HubError(
            400,
            "metadata_mismatch",
            f"sdist metadata ({sdist_meta.name} {sdist_meta.version}) does not match the wheel "
            f"({meta.name} {meta.version})",
        )
    return meta, content_hash, version


def publish_version(
    hub: Hub,
    user: Principal,
    owner: str,
    name: str,
    wheel: Upload,
    sdist: Upload | None,
    form: PublishForm,
    source: Upload | None = None,
) -> tuple[int, int]:
    """Validate, store blobs, make visible: (env_id, version_id). ``source``: a staged push's
    source archive (not an sdist: a flat tar of the project), kept for ``env pull`` under a
    name of the hub's own, ``<name>-<version>.source.tar.gz``."""
    in_file = _check_filenames(wheel, sdist)
    wheel.file.seek(0)
    wheel_data = wheel.file.read()
    sdist_data = None
    if sdist is not None:
        sdist.file.seek(0)
        sdist_data = sdist.file.read()
    meta, content_hash, version = _inspect(wheel_data, sdist_data, wheel, in_file)
    if canonicalize_name(meta.name) != canonicalize_name(name):
        raise HubError(
            400,
            "metadata_mismatch",
            f"the package is named {meta.name!r}, not {name!r}: the environment name must be "
            "the distribution name",
        )
    problem = entry_point_problem(meta.entry_points, owner, name, meta.top_level)
    if problem is not None:
        raise HubError(400, "foreign_entry_point", problem)
    problem = top_level_problem(meta.top_level, meta.name)
    if problem is not None:
        raise HubError(400, "foreign_module", problem)
    check_text(meta.summary, "the package's Summary")
    if source is not None:
        source = Upload(f"{sdist_root(meta.name, version)}.source.tar.gz", source.file)
        source.file.seek(0)
        source_data = source.file.read()
        try:
            inspect_source(source_data)
            if form.readme is None:  # the official push sends no readme field: its README.md
                form = replace(form, readme=source_readme(source_data, MAX_FIELD))
        except UnsafeArchiveError as exc:
            raise HubError(400, exc.code, f"the source archive: {exc}") from exc
        check_text(form.readme, "the source archive's README.md")
    with hub.leased_blobs() as blobs:  # each leased before it is written: see blob_leases
        stored = []
        for kind, upload in (("wheel", wheel), ("sdist", sdist), ("source", source)):
            if upload is None:
                continue
            sha = file_sha256(upload.file)
            metadata = meta.raw if kind == "wheel" else None
            stored.append(
                StoredFile(
                    kind=kind,
                    filename=upload.filename,
                    sha256=sha,
                    size=_size(upload.file),
                    blob=blobs.put_file(upload.file, sha),
                    metadata_blob=blobs.put(metadata) if metadata else None,
                    metadata_sha256=hashlib.sha256(metadata).hexdigest() if metadata else None,
                )
            )
        new = NewVersion(
            owner=owner,
            name=name,
            distribution=meta.name,
            version=version,
            content_hash=content_hash,
            requires_python=meta.requires_python,
            dependencies=meta.requires_dist,
            summary=meta.summary,
            top_level=meta.top_level,
            visibility=form.visibility,
            readme=form.readme,
            description=form.description,
            tags=form.tags,
            token_id=user.token_id or None,
            may_change_visibility=hub.auth.can_administer(user, owner),
        )
        return hub.catalog.commit_version(new, stored, blobs.give_back)


def _size(file: BinaryIO) -> int:
    file.seek(0, 2)
    size = file.tell()
    file.seek(0)
    return size
