"""Blob storage for the hub: content-addressed files in a directory or an S3-compatible bucket.

A blob's key is the sha256 of its bytes, so a blob is written once and never changes; it is
written before the database row that refers to it, so a crash mid-publish leaves at most an
unreferenced blob, never a visible half-version. ``put_file`` streams from a file (uploads are
spooled to disk, never held whole in memory).

Unreferenced blobs are collected (``hub_server.services.blob_collection``) once they are older
than a grace period. A put of a blob that is already there refreshes its time (a touch, or S3's
rewrite), so a blob a push is about to commit a row for is never old; ``discard_if_older``
re-checks the age at the moment it removes.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import shutil
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import BinaryIO, Protocol
from urllib.parse import urlsplit

from hub_server.errors import Unavailable

CHUNK = 1024 * 1024


class BlobStore(Protocol):
    def put(self, data: bytes) -> str: ...
    def put_file(self, file: BinaryIO, sha256: str) -> str: ...
    def get(self, key: str) -> bytes: ...
    def exists(self, key: str) -> bool: ...
    def keys_older_than(self, cutoff: float) -> list[str]: ...
    def discard_if_older(self, key: str, cutoff: float) -> bool: ...


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
        try:
            os.utime(path)  # there already: now young, so the collector leaves it to this push
        except FileNotFoundError:
            # 0700 whatever the root's mode: a --blobs dir the user already had (0755) let
            # every local user list private wheels' hashes, sizes and upload times
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
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

    def exists(self, key: str) -> bool:
        return self._path(key).exists()

    def keys_older_than(self, cutoff: float) -> list[str]:
        """The blobs last written before ``cutoff`` (a Unix time). On the way it removes what
        is no blob and as old (a temp file of a write, or a blob set aside by a collection,
        that a crash cut short): only the collector, and tests of an idle store, call this."""
        keys = []
        for path in self.root.glob("??/*"):
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_mtime >= cutoff:
                    continue
                if re.fullmatch(r"[0-9a-f]{64}", path.name):
                    keys.append(path.name)
                else:  # a write or a collection a crash cut short: nobody's
                    path.unlink()
        return keys

    def discard_if_older(self, key: str, cutoff: float) -> bool:
        """Remove the blob if it is still older than ``cutoff``. It is moved aside first and
        its age read there, so a push's touch (or its rewrite) that lands meanwhile is seen,
        and the blob is put back (the same bytes, whoever wrote them)."""
        path = self._path(key)
        aside = path.with_name(f".{key}.collecting")
        try:
            os.rename(path, aside)
        except FileNotFoundError:
            return False
        if aside.stat().st_mtime >= cutoff:
            os.replace(aside, path)
            return False
        aside.unlink()
        return True


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

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError:
            return False
        return True

    def keys_older_than(self, cutoff: float) -> list[str]:
        """The blobs last written before ``cutoff`` (a Unix time); never the staging area's
        objects, which live under a sibling prefix."""
        prefix = f"{self.prefix}/" if self.prefix else ""
        keys = []
        for page in self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        ):
            for item in page.get("Contents", []):
                name = item["Key"][len(prefix) :]
                key = name.rpartition("/")[2]
                if (
                    name == f"{key[:2]}/{key}"
                    and re.fullmatch(r"[0-9a-f]{64}", key)
                    and item["LastModified"].timestamp() < cutoff
                ):
                    keys.append(key)
        return keys

    def discard_if_older(self, key: str, cutoff: float) -> bool:
        """Remove the object if it is still older than ``cutoff`` (read again just before:
        a push rewrites a blob it stores, so one it is about to commit is young)."""
        from botocore.exceptions import ClientError

        try:
            head = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError:
            return False
        if head["LastModified"].timestamp() >= cutoff:
            return False
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        return True


STAGED_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")
S3_DELETE_BATCH = 1000  # the most keys one DeleteObjects request takes


def local_staging_dir(root: Path) -> Path:
    """Where a ``file:///`` blob store's staged bytes live: ``ROOT.staging`` beside it, which
    ``prime hub serve`` checks is the user's own as it checks ``ROOT``."""
    return root.with_name(root.name + ".staging")


class StagingArea:
    """Staged bytes by staged-file id, beside (never inside) the hub's blob store."""

    def __init__(self, blobs: BlobStore) -> None:
        self.local: Path | None = None
        self.s3: S3BlobStore | None = None
        if isinstance(blobs, LocalBlobStore):
            self.local = local_staging_dir(blobs.root)
            self.local.mkdir(mode=0o700, parents=True, exist_ok=True)
        elif isinstance(blobs, S3BlobStore):
            self.s3 = blobs
        else:
            raise TypeError(f"no staging area for {type(blobs).__name__}")

    def _key(self, staged_id: str) -> str:
        if not STAGED_ID.fullmatch(staged_id):
            raise ValueError(f"bad staged id {staged_id!r}")
        assert self.s3 is not None
        prefix = self.s3.prefix
        return f"{prefix}.staging/{staged_id}" if prefix else f"staging/{staged_id}"

    def _path(self, staged_id: str) -> Path:
        if not STAGED_ID.fullmatch(staged_id):
            raise ValueError(f"bad staged id {staged_id!r}")
        assert self.local is not None
        return self.local / staged_id

    def put(self, staged_id: str, file: BinaryIO) -> None:
        file.seek(0)
        if self.s3 is not None:  # one PUT (a staged file is under MAX_FILE, S3 takes 5 GB):
            # the transfer manager's threads and HEAD cost the hub more CPU than the bytes
            self.s3.client.put_object(Bucket=self.s3.bucket, Key=self._key(staged_id), Body=file)
            return
        path = self._path(staged_id)
        fd, tmp = tempfile.mkstemp(dir=path.parent)
        with os.fdopen(fd, "wb") as out:  # no fsync: the publish checks the bytes' sha256
            shutil.copyfileobj(file, out, CHUNK)
        os.replace(tmp, path)

    def open(self, staged_id: str) -> BinaryIO:
        if self.s3 is not None:
            spool = tempfile.SpooledTemporaryFile(max_size=1024 * 1024)
            body = self.s3.client.get_object(Bucket=self.s3.bucket, Key=self._key(staged_id))
            with contextlib.closing(body["Body"]) as stream:  # one GET, no transfer manager
                shutil.copyfileobj(stream, spool, CHUNK)
            spool.seek(0)
            return spool  # type: ignore[return-value]
        return self._path(staged_id).open("rb")

    def delete(self, *staged_ids: str) -> None:
        """Drop staged files (those already gone are no error); on S3 in one DeleteObjects
        request per thousand, not a request each. Raises ``Unavailable`` where the bucket
        kept any of them."""
        if self.s3 is not None:
            keys = [self._key(staged_id) for staged_id in staged_ids]
            for start in range(0, len(keys), S3_DELETE_BATCH):
                batch = keys[start : start + S3_DELETE_BATCH]
                answer = self.s3.client.delete_objects(
                    Bucket=self.s3.bucket,
                    Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True},
                )
                if answer.get("Errors"):
                    first = answer["Errors"][0]
                    raise Unavailable(
                        "staging_not_deleted",
                        f"the bucket kept {len(answer['Errors'])} staged file(s): "
                        f"{first.get('Key')}: {first.get('Code')} {first.get('Message', '')}",
                    )
            return
        for staged_id in staged_ids:
            with contextlib.suppress(FileNotFoundError):
                self._path(staged_id).unlink()

    def names(self) -> list[str]:
        """What is staged now (tests: an abandoned push leaves nothing)."""
        if self.s3 is not None:
            prefix = self._key("x" * 16)[:-16]
            listed = self.s3.client.list_objects_v2(Bucket=self.s3.bucket, Prefix=prefix)
            return [o["Key"][len(prefix) :] for o in listed.get("Contents", [])]
        assert self.local is not None
        return sorted(p.name for p in self.local.iterdir() if STAGED_ID.fullmatch(p.name))


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
