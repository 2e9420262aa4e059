"""Every setting of a hub, declared once: ``prime hub serve``'s flags are made from this model
(``hub_server.cli``), and tests build this object.

The storage URLs pick the backends: no ``db`` is SQLite in ``data_dir``, ``postgresql://...`` is
PostgreSQL; no ``blobs`` is a directory in ``data_dir``, ``s3://bucket/prefix`` is S3-compatible
object storage (``s3_endpoint`` for MinIO, R2 or a test server; AWS credentials come from the
usual boto3 sources).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field

from verifiers.cli.settings import Flag

MAX_FILE = 50 * 1024 * 1024  # the largest file the hub takes (wheel, sdist, eval or dataset file)
MAX_FIELD = 1024 * 1024  # a form field (README, description); a source archive's README.md too

SERVE, CREATE_USER = "serve", "create-user"
STORAGE = (SERVE, CREATE_USER)  # the storage flags: every command that opens the hub's stores


class HubFlag(Flag):
    """The SDK's ``Flag`` (``verifiers.cli.settings``) with what the hub's command lines add: the
    commands that take the flag, a flag named apart from its field (``--trusted-proxy`` for
    ``trusted_proxies``; ``--no-sdk`` turns ``build_sdk`` off), a default of the command line's
    own (``--data-dir ~/.prime-hub``), and a group of flags that exclude each other."""

    def __init__(
        self,
        *aliases: str,
        commands: tuple[str, ...] = (SERVE,),
        name: str | None = None,
        turns_off: bool = False,
        default: Any = None,
        exclusive: str | None = None,
        env: str | None = None,
        metavar: str | None = None,
        command_line: bool = True,
    ) -> None:
        super().__init__(*aliases, env=env, metavar=metavar, command_line=command_line)
        self.commands = commands
        self.name = name
        self.turns_off = turns_off
        self.default = default
        self.exclusive = exclusive


class HubSettings(BaseModel):
    host: Annotated[str, HubFlag()] = Field(
        "127.0.0.1", description="the address to listen on (default: 127.0.0.1)"
    )
    port: Annotated[int, HubFlag()] = Field(
        8787, description="the port to listen on (default: 8787)"
    )
    data_dir: Annotated[Path, HubFlag(commands=STORAGE, default="~/.prime-hub")] = Field(
        description="SQLite file, blob directory and SDK wheel cache live here (default: "
        "~/.prime-hub)"
    )
    db: Annotated[str | None, HubFlag(commands=STORAGE, env="PRIME_HUB_DB")] = Field(
        None,
        description="postgresql://USER@HOST:PORT/DB, never with a password (default: "
        "$PRIME_HUB_DB, else SQLite in --data-dir; a password comes from $PRIME_HUB_DB, "
        "$PGPASSWORD or ~/.pgpass)",
    )
    blobs: Annotated[str | None, HubFlag(commands=STORAGE)] = Field(
        None, description="s3://BUCKET/PREFIX (default: files in --data-dir)"
    )
    s3_endpoint: Annotated[str | None, HubFlag(commands=STORAGE)] = Field(
        None, description="the S3 API endpoint (MinIO, R2, a test server; default: AWS)"
    )
    public_url: Annotated[str | None, HubFlag()] = Field(
        None,
        description="the hub's own URL for absolute links and the /sdk/ install line (default: "
        "http://HOST:PORT; never taken from a request's Host header)",
    )
    trusted_proxies: Annotated[list[str], HubFlag(name="--trusted-proxy", metavar="ADDRESS")] = (
        Field(
            default_factory=list,
            description="a TLS proxy whose X-Forwarded-Proto/For are believed (repeatable)",
        )
    )
    read_timeout: Annotated[float, HubFlag(env="PRIME_HUB_READ_TIMEOUT", command_line=False)] = (
        Field(
            default_factory=lambda: float(os.environ.get("PRIME_HUB_READ_TIMEOUT", "30")),
            description="seconds a client may stall while sending headers or a body (default: 30)",
        )
    )
    blob_grace: Annotated[float, HubFlag(env="PRIME_HUB_BLOB_GRACE", command_line=False)] = Field(
        default_factory=lambda: float(os.environ.get("PRIME_HUB_BLOB_GRACE", "3600")),
        description="seconds an unreferenced blob is kept before the collector removes it; "
        "longer than any push takes from storing its blobs to its commit (default: 3600)",
    )
    blob_collect_interval: Annotated[
        float, HubFlag(env="PRIME_HUB_BLOB_COLLECT_INTERVAL", command_line=False)
    ] = Field(
        default_factory=lambda: os.environ.get("PRIME_HUB_BLOB_COLLECT_INTERVAL", "3600"),
        ge=0,
        validate_default=True,  # the variable's text is checked (a number, >= 0) like a flag's
        description="seconds between two collections of orphan blobs and expired staged uploads "
        "in a running hub, after the one at its start; 0: only at the start (default: 3600)",
    )
    login_ttl: Annotated[float, HubFlag(env="PRIME_HUB_LOGIN_TTL", command_line=False)] = Field(
        default_factory=lambda: float(os.environ.get("PRIME_HUB_LOGIN_TTL", "600")),
        description="seconds a `prime login` of Prime's official CLI waits for its approval in "
        "the browser (default: 600)",
    )
    upload_url_ttl: Annotated[
        float, HubFlag(env="PRIME_HUB_UPLOAD_URL_TTL", command_line=False)
    ] = Field(
        default_factory=lambda: float(os.environ.get("PRIME_HUB_UPLOAD_URL_TTL", "900")),
        gt=0,
        description="seconds an upload URL of a staged push (Prime's official CLI) stays valid; "
        "an unpublished push expires after twice that (default: 900)",
    )
    sdk_wheel: Annotated[Path | None, HubFlag(exclusive="sdk")] = Field(
        None,
        description="the SDK wheel to serve at /sdk/ (default: built at start from this "
        "checkout's tracked files)",
    )
    build_sdk: Annotated[bool, HubFlag(name="--no-sdk", turns_off=True, exclusive="sdk")] = Field(
        True,
        description="serve an SDK wheel at /sdk/ (--no-sdk: serve none, build none)",
    )


def hub_flag(field: Any) -> HubFlag | None:
    """A field's ``HubFlag``, or None for a setting no command line takes."""
    return next((m for m in field.metadata if isinstance(m, HubFlag)), None)
