"""Wire models shared by the hub server and its client (one definition, both sides)."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, Field

Visibility = Literal["public", "private"]
Scope = Literal["read", "publish", "admin"]

AttachmentKind = Literal["evals", "datasets"]
"""What attaches to a version, as its URL names it: ``.../versions/{version}/{kind}``."""
ATTACHMENT_KINDS: tuple[AttachmentKind, ...] = get_args(AttachmentKind)


def attachments_path(owner: str, name: str, version: str, kind: AttachmentKind) -> str:
    return f"/api/v1/environments/{owner}/{name}/versions/{version}/{kind}"


Sort = Literal["updated", "created", "name", "downloads"]
SORTS: tuple[str, ...] = get_args(Sort)
"""The orders of the environment list (``sort``); the hub refuses any other (``invalid_sort``)."""


class ListQuery(BaseModel):
    """The environment list's query (``GET /api/v1/environments``, ``prime env list|search``):
    filters, order and page, as the client sends them and the server reads them. ``sort`` stays
    a plain string here, so that one outside ``SORTS`` reaches the hub and gets its error."""

    q: str | None = None
    owner: str | None = None
    tag: str | None = None
    sort: str = "updated"
    page: int = 1
    per_page: int = 20

    def params(self) -> dict[str, Any]:
        """The query string's parameters: those given, none that are None."""
        return {k: v for k, v in self.model_dump().items() if v is not None}


LIST_TEXT_PARAMS = ("q", "owner", "tag", "sort")
LIST_INT_PARAMS = ("page", "per_page")


class ErrorBody(BaseModel):
    code: str  # stable, machine-readable (e.g. "version_exists")
    message: str  # for humans: what happened and what to do


class ErrorResponse(BaseModel):
    """Every error answer of the hub: ``error.code`` for this project's client to branch on;
    ``detail``, the same message, where FastAPI-style clients (Prime's official ``prime`` CLI
    among them) look for it."""

    error: ErrorBody
    detail: str | None = None

    @classmethod
    def of(cls, code: str, message: str) -> ErrorResponse:
        return cls(error=ErrorBody(code=code, message=message), detail=message)


class FileInfo(BaseModel):
    """One file of a version: its wheel, its sdist, or (pushed by Prime's official CLI) its
    source archive, a flat tar.gz of the project that ``env pull`` extracts and no index lists."""

    filename: str
    kind: Literal["wheel", "sdist", "source"]
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


class AccountDeleted(BaseModel):
    """What deleting an account removed: the user, the teams that had no other member, and
    the environments of both (their version numbers stay retired)."""

    user: str
    teams: list[str] = Field(default_factory=list)
    environments: list[str] = Field(default_factory=list)


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
