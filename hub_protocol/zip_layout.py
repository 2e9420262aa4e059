"""A wheel's zip must read the same whichever way it is read.

Python's ``zipfile`` reads the central directory at the end of the file and forgives a lot: data
before the first entry (it shifts every offset), data after the end record, a local header whose
name differs from the central directory's (noticed only when that member is read, as a
``BadZipFile``). Installers read differently: uv streams the local headers from the start and
refuses what Python forgives. A hub that accepted such a wheel would publish a version nobody
can install, or one whose members differ by reader (the checks see one file, an installer
another). So the whole layout is checked before a member is read: the entries are contiguous
from byte 0, each local header names the member the central directory names, with its
compression, the central directory follows the last entry, and the end record ends the file.
Members are stored or deflated (what wheels use; other methods are readers' differences too) and
never encrypted. No header carries an extra field that renames its member or makes it a link
(Info-ZIP's Unicode Path, ASi Unix): Python ignores them, uv and ``unzip`` do not, and a member
Python read as ``…dist-info/licenses/NOTICE`` was installed by uv as ``aaa_evil.pth``.
"""

from __future__ import annotations

import struct
import zipfile

LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # signature ... name length, extra length
END_RECORD = struct.Struct("<4s4H2LH")  # signature, disks, entries, cd size, cd offset, comment
ZIP64_LOCATOR = struct.Struct("<4sLQL")  # signature, disk, zip64 end record offset, disks
ZIP64_END = struct.Struct("<4sQ2H2L4Q")  # signature, size, versions, disks, entries, size, offset
LOCAL_SIGNATURE, END_SIGNATURE = b"PK\x03\x04", b"PK\x05\x06"
ZIP64_LOCATOR_SIGNATURE, ZIP64_END_SIGNATURE = b"PK\x06\x07", b"PK\x06\x06"
DESCRIPTOR_SIGNATURE = b"PK\x07\x08"
METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflated"}
ENCRYPTED, HAS_DESCRIPTOR, UTF8_NAME = 0x1, 0x8, 0x800
ZIP64_EXTRA = 0x0001
# extra fields some readers act on and Python's zipfile ignores: a second name, a link target
READER_DEPENDENT_EXTRAS = {
    0x7075: "a Unicode Path field (a second name)",
    0x756E: "an ASi Unix field",
}


class ZipLayoutError(ValueError):
    """The zip's structures disagree (the message says where)."""


def check_layout(data: bytes, archive: zipfile.ZipFile) -> None:
    """Raise ``ZipLayoutError`` unless ``data`` (which ``archive`` read) is one zip laid out
    plainly: entries back to back from byte 0, then the central directory, then the end."""
    directory_offset, directory_end = _central_directory(data, archive)
    position = 0
    for info in sorted(archive.infolist(), key=lambda i: i.header_offset):
        if info.header_offset != position:
            where = "before the first entry" if position == 0 else f"before {info.orig_filename!r}"
            raise ZipLayoutError(f"the zip has data {where} that no entry accounts for")
        position = _entry_end(data, info)
    if position != directory_offset:
        raise ZipLayoutError("the zip has data between its last entry and its central directory")
    if directory_end > len(data):
        raise ZipLayoutError("the zip's central directory runs past the end of the file")


def _central_directory(data: bytes, archive: zipfile.ZipFile) -> tuple[int, int]:
    """(offset, end) of the central directory, from an end record that ends the file."""
    end = len(data) - END_RECORD.size - len(archive.comment)
    if end < 0 or data[end : end + 4] != END_SIGNATURE:
        raise ZipLayoutError(
            "the zip has trailing data after its end-of-central-directory record "
            "(a second archive appended, or junk)"
        )
    _, disk, _, _, entries, size, offset, comment = END_RECORD.unpack_from(data, end)
    if comment != len(archive.comment) or disk != 0:
        raise ZipLayoutError("the zip's end-of-central-directory record does not end the file")
    records_start = end
    if end >= ZIP64_LOCATOR.size and data[end - 20 : end - 16] == ZIP64_LOCATOR_SIGNATURE:
        _, _, zip64_end, _ = ZIP64_LOCATOR.unpack_from(data, end - ZIP64_LOCATOR.size)
        fields = ZIP64_END.unpack_from(data, zip64_end) if zip64_end + 56 <= end else None
        if fields is None or fields[0] != ZIP64_END_SIGNATURE:
            raise ZipLayoutError("the zip's zip64 end record is not where its locator says")
        entries, size, offset = fields[7], fields[8], fields[9]
        records_start = zip64_end
        if zip64_end + 12 + fields[1] != end - ZIP64_LOCATOR.size:
            raise ZipLayoutError("the zip has data between its zip64 records")
    if offset + size != records_start or archive.start_dir != offset:
        raise ZipLayoutError(
            "the zip's central directory is not where its end record says (data before the "
            "first entry, or a second archive prepended)"
        )
    if entries != len(archive.infolist()):
        raise ZipLayoutError(
            f"the zip's end record counts {entries} entries; its central directory has "
            f"{len(archive.infolist())}"
        )
    return offset, offset + size


def _entry_end(data: bytes, info: zipfile.ZipInfo) -> int:
    """Where the entry at ``info.header_offset`` ends (after its data and any descriptor),
    once its local header is checked against the central directory's ``info``."""
    start = info.header_offset
    if start + LOCAL_HEADER.size > len(data):
        raise ZipLayoutError(f"{info.orig_filename!r}: its local header is past the end")
    signature, _, flags, method, _, _, _, _, _, name_length, extra_length = (
        LOCAL_HEADER.unpack_from(data, start)
    )
    name_start = start + LOCAL_HEADER.size
    name = data[name_start : name_start + name_length]
    if signature != LOCAL_SIGNATURE or name != _central_name(info):
        raise ZipLayoutError(
            f"the local header of {info.orig_filename!r} names {name!r}: a zip's two lists of "
            "its members must agree"
        )
    if (flags | info.flag_bits) & ENCRYPTED:
        raise ZipLayoutError(f"{info.orig_filename!r} is encrypted")
    if method != info.compress_type or method not in METHODS:
        raise ZipLayoutError(
            f"{info.orig_filename!r} uses compression method {method}: wheel members are "
            "stored or deflated"
        )
    extra = data[name_start + name_length : name_start + name_length + extra_length]
    ignored = sorted(
        (_extra_fields(extra) | _extra_fields(info.extra)) & READER_DEPENDENT_EXTRAS.keys()
    )
    if ignored:
        raise ZipLayoutError(
            f"{info.orig_filename!r} carries {READER_DEPENDENT_EXTRAS[ignored[0]]}, which "
            "installers read and Python's zipfile does not: readers would see different members"
        )
    end = name_start + name_length + extra_length + info.compress_size
    if flags & HAS_DESCRIPTOR:
        if data[end : end + 4] == DESCRIPTOR_SIGNATURE:
            end += 4
        end += 20 if ZIP64_EXTRA in _extra_fields(extra) else 12  # crc32 and the two sizes
    return end


def _central_name(info: zipfile.ZipInfo) -> bytes:
    """The name's bytes as the central directory holds them (``zipfile`` decodes them as UTF-8
    when the entry says so, else as cp437, which round-trips every byte)."""
    return info.orig_filename.encode("utf-8" if info.flag_bits & UTF8_NAME else "cp437")


def _extra_fields(extra: bytes) -> set[int]:
    """The ids of the fields in a header's extra data."""
    found, position = set(), 0
    while position + 4 <= len(extra):
        field, size = struct.unpack_from("<2H", extra, position)
        found.add(field)
        position += 4 + size
    return found
