"""Wire models shared by the hub server and its client (one definition, both sides)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Visibility = Literal["public", "private"]
Scope = Literal["read", "publish", "admin"]


class ErrorBody(BaseModel):
    code: str  # stable, machine-readable (e.g. "version_exists")
    message: str  # for humans: what happened and what to do


class ErrorResponse(BaseModel):
    error: ErrorBody


class FileInfo(BaseModel):
    filename: str
    kind: Literal["wheel", "sdist"]
    sha256: str
    size: int
    upload_time: str
    url: str
    metadata_sha256: str | None = None


class VersionInfo(BaseModel):
    owner: str
    name: str
    version: str
    created_at: str
    yanked: bool = False
    yanked_reason: str | None = None
    content_hash: str
    requires_python: str | None = None
    dependencies: list[str] = Field(default_factory=list)
    summary: str | None = None
    files: list[FileInfo] = Field(default_factory=list)


class EnvironmentSummary(BaseModel):
    owner: str
    name: str
    distribution: str
    visibility: Visibility
    description: str | None = None
    tags: list[str] = Field(default_factory=list)
    latest_version: str | None = None
    created_at: str
    updated_at: str


class EnvironmentInfo(EnvironmentSummary):
    readme: str | None = None
    versions: list[str] = Field(default_factory=list)
    index_url: str


class EnvironmentPage(BaseModel):
    items: list[EnvironmentSummary]
    total: int
    page: int
    per_page: int


def _default_scopes() -> list[Scope]:
    return ["read", "publish"]


class TokenCreate(BaseModel):
    name: str = Field(default="token", max_length=64)
    scopes: list[Scope] = Field(default_factory=_default_scopes)
    expires_in_days: int | None = Field(default=None, ge=1, le=3650)


class TokenCreated(BaseModel):
    token: str
    name: str
    scopes: list[Scope]
    id: int | None = None
    expires_at: str | None = None


class TokenInfo(BaseModel):
    """A token as listed: never its secret."""

    id: int
    name: str
    scopes: list[Scope]
    created_at: str
    expires_at: str | None = None
    revoked: bool = False


class Me(BaseModel):
    user: str
    is_admin: bool
    scopes: list[Scope]
    owners: list[str]  # namespaces this user may publish to (self and teams)


class UserCreate(BaseModel):
    name: str
    is_admin: bool = False


class TeamCreate(BaseModel):
    name: str


class TeamMember(BaseModel):
    user: str


class YankRequest(BaseModel):
    reason: str | None = None
    undo: bool = False  # un-yank


class DatasetInfo(BaseModel):
    """A dataset generated from a version's rollouts (vf-data), attached to that version."""

    id: int
    owner: str
    name: str
    version: str
    uploaded_by: str
    created_at: str
    rows: int
    filter: str
    models: list[str] = Field(default_factory=list)
    sha256: str
    url: str


class EvalInfo(BaseModel):
    id: int
    owner: str
    name: str
    version: str
    uploaded_by: str
    created_at: str
    model: str | None = None
    summary: dict[str, Any] = Field(default_factory=dict)
    num_rollouts: int = 0
