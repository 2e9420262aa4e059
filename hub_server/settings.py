"""Every setting of a hub, declared once: ``prime hub serve`` flags and tests build this object.

The storage URLs pick the backends: no ``db`` is SQLite in ``data_dir``, ``postgresql://...`` is
PostgreSQL; no ``blobs`` is a directory in ``data_dir``, ``s3://bucket/prefix`` is S3-compatible
object storage (``s3_endpoint`` for MinIO, R2 or a test server; AWS credentials come from the
usual boto3 sources).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

MAX_FILE = 50 * 1024 * 1024  # the largest file the hub takes (wheel, sdist, eval or dataset file)


class HubSettings(BaseModel):
    data_dir: Path = Field(description="SQLite file, blob directory and SDK wheel cache live here")
    db: str | None = Field(None, description="postgresql://USER@HOST:PORT/DB (default: SQLite)")
    blobs: str | None = Field(None, description="s3://BUCKET/PREFIX (default: data_dir/files)")
    s3_endpoint: str | None = Field(None, description="S3 API endpoint (MinIO, R2, a test server)")
    public_url: str | None = Field(
        None,
        description="the hub's own origin for absolute links (download URLs, the /sdk/ install "
        "line); never taken from a request's Host header",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="peer addresses whose X-Forwarded-Proto/For are believed (a TLS proxy)",
    )
    read_timeout: float = Field(
        default_factory=lambda: float(os.environ.get("PRIME_HUB_READ_TIMEOUT", "30")),
        description="seconds a client may stall while sending headers or a body",
    )
    sdk_wheel: Path | None = Field(None, description="the SDK wheel to serve at /sdk/")
    build_sdk: bool = Field(
        True, description="build the SDK wheel from this checkout's tracked files at start"
    )
