"""Blob storage for the hub: content-addressed files in a directory or an S3-compatible bucket.

A blob's key is the sha256 of its bytes, so a blob is written once and never changes; it is
written before the database row that refers to it, so a crash mid-publish leaves at most an
unreferenced blob, never a visible half-version. ``put_file`` streams from a file (uploads are
spooled to disk, never held whole in memory).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import BinaryIO, Protocol
from urllib.parse import urlsplit

CHUNK = 1024 * 1024


class BlobStore(Protocol):
    def put(self, data: bytes) -> str: ...
    def put_file(self, file: BinaryIO, sha256: str) -> str: ...
    def get(self, key: str) -> bytes: ...


def check_key(key: str) -> str:
    if len(key) != 64 or not all(c in "0123456789abcdef" for c in key):
        raise ValueError(f"bad blob key {key!r}")
    return key


def file_sha256(file: BinaryIO) -> str:
    digest = hashlib.sha256()
    file.seek(0)
    while chunk := file.read(CHUNK):
        digest.update(chunk)
    file.seek(0)
    return digest.hexdigest()


class _Bytes(ABC):
    """``put(bytes)`` for stores that implement ``put_file``."""

    @abstractmethod
    def put_file(self, file: BinaryIO, sha256: str) -> str: ...

    def put(self, data: bytes) -> str:
        return self.put_file(io.BytesIO(data), hashlib.sha256(data).hexdigest())


class LocalBlobStore(_Bytes):
    """Files under a directory, ``ab/abcdef...``; writes are atomic (temp file, fsync, rename)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(mode=0o700, parents=True, exist_ok=True)  # private environments' wheels too

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)[:2] / key

    def put_file(self, file: BinaryIO, sha256: str) -> str:
        path = self._path(sha256)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent)
            with os.fdopen(fd, "wb") as out:
                file.seek(0)
                shutil.copyfileobj(file, out, CHUNK)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
        return sha256

    def get(self, key: str) -> bytes:
        return self._path(key).read_bytes()


class S3BlobStore(_Bytes):
    """Objects ``PREFIX/ab/abcdef...`` in one bucket, through boto3 (AWS S3, MinIO, R2, moto)."""

    def __init__(self, bucket: str, prefix: str, endpoint: str | None = None) -> None:
        try:
            import boto3
            from botocore.config import Config
        except ImportError:
            from verifiers.installs.extras import install_hint

            hint = install_hint("hub-s3", "boto3")
            raise SystemExit(f"--blobs s3://... needs boto3: {hint}") from None
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.client = boto3.client(
            "s3",
            endpoint_url=endpoint or os.environ.get("AWS_ENDPOINT_URL") or None,
            config=Config(retries={"max_attempts": 5, "mode": "standard"}),
        )

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key[:2]}/{key}" if self.prefix else f"{key[:2]}/{key}"

    def put_file(self, file: BinaryIO, sha256: str) -> str:
        file.seek(0)
        self.client.upload_fileobj(file, self.bucket, self._key(sha256))
        return sha256

    def get(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()


def open_blob_store(url: str | None, data_dir: Path, endpoint: str | None = None) -> BlobStore:
    """``None`` (``data_dir/files``), ``file:///PATH`` or ``s3://bucket/prefix``."""
    if url is None:
        return LocalBlobStore(data_dir / "files")
    parts = urlsplit(url)
    if parts.scheme == "file":
        return LocalBlobStore(Path(parts.path))
    if parts.scheme == "s3" and parts.netloc:
        return S3BlobStore(parts.netloc, parts.path, endpoint)
    raise ValueError(f"--blobs {url!r}: use s3://BUCKET/PREFIX or file:///PATH")
