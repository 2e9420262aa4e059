"""The rows the repositories return, typed: one frozen dataclass per shape a query reads
(``engine.typed`` makes one from either backend's row). JSON columns stay text here; the
presenters parse them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EnvironmentRow:
    """An environment as stored (``tags`` is JSON text; ``serial`` counts its changes)."""

    id: int
    owner: str
    name: str
    name_key: str
    distribution: str
    visibility: str
    description: str | None
    tags: str
    readme: str | None
    created_at: str
    updated_at: str
    downloads: int
    latest_version: str | None
    serial: int


@dataclass(frozen=True)
class VersionRow:
    """A published version as stored (``dependencies`` and ``top_level`` are JSON text)."""

    id: int
    env_id: int
    version: str
    version_key: str
    created_at: str
    yanked: int
    yanked_reason: str | None
    content_hash: str
    requires_python: str | None
    dependencies: str
    summary: str | None
    top_level: str


@dataclass(frozen=True)
class FileRow:
    """A published file (a wheel or an sdist) as stored; ``blob`` is its blob store key."""

    id: int
    version_id: int
    env_id: int
    filename: str
    kind: str
    sha256: str
    size: int
    blob: str
    metadata_blob: str | None
    metadata_sha256: str | None
    upload_time: str


@dataclass(frozen=True, slots=True)
class IndexHead:
    """An environment as its simple index needs it: who may read it (``visibility``,
    ``owner``), its page's cache key (``id``, ``created_at``, ``serial``) and the links."""

    id: int
    owner: str
    name: str
    distribution: str
    visibility: str
    created_at: str
    serial: int


@dataclass(frozen=True)
class IndexRow:
    """One line of a simple-index page: a file with its version's index fields."""

    filename: str
    sha256: str
    size: int
    upload_time: str
    metadata_sha256: str | None
    version: str
    yanked: int
    yanked_reason: str | None
    requires_python: str | None


@dataclass(frozen=True)
class SummaryRow:
    """An environment as a listing shows it (``SUMMARY_COLUMNS``; ``tags`` is JSON text)."""

    id: int
    owner: str
    name: str
    distribution: str
    visibility: str
    description: str | None
    tags: str
    latest_version: str | None
    created_at: str
    updated_at: str
    downloads: int
    serial: int


@dataclass(frozen=True)
class EvalRow:
    """An attached eval run as stored (``summary`` and ``histogram`` are JSON text)."""

    id: int
    version_id: int
    uploaded_by: str
    created_at: str
    model: str | None
    summary: str
    num_rollouts: int
    histogram: str


@dataclass(frozen=True)
class DatasetRow:
    """An attached dataset as stored (``models`` is JSON text; the blobs are keys)."""

    id: int
    version_id: int
    uploaded_by: str
    created_at: str
    rows: int
    filter: str
    models: str
    card_blob: str
    data_blob: str
    data_sha256: str


@dataclass(frozen=True)
class CredentialRow:
    """A token (or a web session's token) with its user: what a principal is made from."""

    id: int  # the user's
    name: str
    is_admin: int
    token_id: int
    scopes: str  # comma-separated, as stored (stored_scopes)
    expires_at: str | None
    revoked_at: str | None


@dataclass(frozen=True)
class SessionRow(CredentialRow):
    session_expires: str


@dataclass(frozen=True)
class TokenRow:
    """One of a user's tokens, never its secret (only its hash is stored, and not read here)."""

    id: int
    name: str
    scopes: str
    created_at: str
    expires_at: str | None
    revoked_at: str | None


@dataclass(frozen=True)
class StagedEvalRow:
    """An eval pushed by Prime's official CLI: open (``eval_id`` None) until its finalize,
    then the alias of the eval it became (``metadata`` is the checked metadata.json text)."""

    id: str
    user_id: int
    env_id: int
    version_id: int
    metadata: str
    expires_at: str
    eval_id: int | None


@dataclass(frozen=True)
class PlacedEvalRow:
    """An attached eval with where it hangs (environment, version) and its official-CLI alias."""

    id: int
    env_id: int
    owner: str
    name: str
    visibility: str
    version: str
    uploaded_by: str
    created_at: str
    model: str | None
    summary: str
    num_rollouts: int
    metadata_blob: str
    results_blob: str
    alias: str | None


@dataclass(frozen=True)
class ChallengeRow:
    """A pending ``prime login`` as its approval page shows it (never its secrets)."""

    client: str  # the address that asked for it
    created_at: str
    expires_at: str
