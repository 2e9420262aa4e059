"""The Environments Hub API that Prime Intellect's own ``prime`` CLI speaks (``prime==0.18.0``):
``/api/v1/user/whoami`` and ``/api/v1/environmentshub/...``, so the official client works
against a self-hosted hub unchanged.

Only the wire is new here. Every answer comes from the services the hub's own routes use (the
same reads, the same access rule, the same ``administered`` check before a delete), in the
official API's shapes: a ``{"data": ...}`` envelope, visibility in capitals, the content hash as
bare hex. Errors keep the hub's ``error.code`` and add the ``detail`` string this client prints.

Links handed out (the simple index, the wheel, the source archive) are the hub's own
``--public-url`` origin and carry no credential: the official client sends its token to a
package URL, so it must never point anywhere else. A private environment gets no index or wheel
URL (the client then pulls its source with its token, from this hub).

``prime env push``'s staged push has a router of its own (``environmentshub_push``).
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Query

from hub_server.db.rows import EnvironmentRow, SummaryRow, VersionRow
from hub_server.errors import HubError
from hub_server.presenters.views import Views
from hub_server.routers.deps import HubDep, MaybeUser, User, ViewsDep
from hub_server.routers.environments import MAX_PAGE, check_filters, environment_page
from hub_server.routers.publishing import administered
from hub_server.services.auth import Principal, viewer_of
from hub_server.services.hub import Hub

router = APIRouter(prefix="/api/v1", tags=["environments hub api (official prime CLI)"])

SORT_BY = {"created_at": "created", "updated_at": "updated", "name": "name", "stars": "downloads"}
NATURAL_ORDER = {"created": "desc", "updated": "desc", "name": "asc", "downloads": "desc"}
HASH_PREFIX = re.compile(r"(?:sha256:)?([0-9a-f]{8,64})")


def data(value: Any) -> dict[str, Any]:
    return {"data": value}


def visibility(env: SummaryRow | EnvironmentRow) -> str:
    return str(env.visibility).upper()


def bare_hash(content_hash: str) -> str:
    return content_hash.removeprefix("sha256:")


def absolute(views: Views, path: str) -> str | None:
    """An absolute link on the hub's own origin, or None where the hub has no public URL
    (the official client takes only absolute ones)."""
    return views.url(path) if views.base else None


# --- who am I ---------------------------------------------------------------------------------------
@router.get("/user/whoami")
def whoami(user: User) -> dict[str, Any]:
    write = bool(user.scopes & {"publish", "admin"})
    return data(
        {
            "id": str(user.user_id),
            "slug": user.name,
            "name": user.name,
            "email": None,
            "is_admin": user.is_admin,
            "teams": user.teams,
            "scope": {
                "environments": {"read": True, "write": write},
                "evaluations": {"read": True, "write": write},
            },
        }
    )


# --- listing ------------------------------------------------------------------------------------------
def listed(env: SummaryRow) -> dict[str, Any]:
    return {
        "id": str(env.id),
        "owner": {"name": env.owner},
        "name": env.name,
        "description": env.description or "",
        "visibility": visibility(env),
        "latest_version": env.latest_version,
        "stars": 0,
        "downloads": env.downloads,
        "tags": json.loads(env.tags),
        "created_at": env.created_at,
        "updated_at": env.updated_at,
    }


@router.get("/environmentshub/")
def list_environments(
    hub: HubDep,
    user: MaybeUser,
    offset: int = Query(0, ge=0),
    limit: int = Query(20, ge=1, le=100),
    sort_by: str = "created_at",
    sort_order: str = "desc",
    owner: str | None = None,
    search: str | None = Query(None, max_length=200),
    tags: list[str] | None = Query(None),
    visibility: str | None = None,
    mine_only: bool = False,
    starred_only: bool = False,
    include_teams: bool = True,
) -> dict[str, Any]:
    """The listing: the same search as ``GET /api/v1/environments`` (``search`` is its ``q``,
    one ``tags`` value its ``tag``). Stars do not exist here: every environment has 0, and
    ``sort_by=stars`` sorts by downloads."""
    if sort_by not in SORT_BY:
        raise HubError(400, "invalid_sort", f"sort_by must be one of {', '.join(SORT_BY)}")
    if sort_order not in ("asc", "desc"):
        raise HubError(400, "invalid_sort", "sort_order must be asc or desc")
    if starred_only:
        raise HubError(400, "unsupported_filter", "this hub has no stars")
    if visibility is not None:
        raise HubError(400, "unsupported_filter", "this hub does not filter by visibility")
    if tags and len(tags) > 1:
        raise HubError(400, "unsupported_filter", "this hub filters by one tag at a time")
    tag = tags[0] if tags else None
    if offset // limit + 2 > MAX_PAGE:  # deep pages cost OFFSET rows, as on the native listing
        raise HubError(400, "page_too_deep", "refine the search instead of paging this deep")
    if mine_only:
        if user is None:
            raise HubError(401, "auth_required", "--mine needs an API token")
        owner = owner or user.name
    check_filters(search, owner, tag)
    sort = SORT_BY[sort_by]
    first = environment_page(hub, user, search, owner, tag, sort, 1, limit)
    total = first.total
    if sort_order == NATURAL_ORDER[sort]:
        start, end, reverse = offset, min(offset + limit, total), False
    else:  # the other direction: the mirrored window of the natural order, read backwards
        start, end, reverse = max(0, total - offset - limit), max(0, total - offset), True
    rows = window(hub, user, search, owner, tag, sort, limit, start, end)
    if reverse:
        rows.reverse()
    return {"data": [listed(r) for r in rows], "total_count": total, "offset": offset}


def window(
    hub: Hub, user: Principal | None, q, owner, tag, sort, limit: int, start: int, end: int
) -> list[SummaryRow]:
    """Rows [start, end) of the natural order, from at most two pages of ``limit``."""
    if end <= start:
        return []
    rows: list[SummaryRow] = []
    for page in range(start // limit + 1, (end - 1) // limit + 2):
        found, _ = hub.search.page(viewer_of(user), q, owner, tag, sort, page, limit)
        rows.extend(found)
    first = (start // limit) * limit
    return rows[start - first : end - first]


# --- one environment ----------------------------------------------------------------------------------
def version_detail(
    hub: Hub, views: Views, env: EnvironmentRow, version: VersionRow
) -> dict[str, Any]:
    files = hub.catalog.files_of_versions([version.id])[version.id]
    public = env.visibility == "public"
    base = f"/files/{quote(env.owner)}/{quote(env.name)}/"
    wheel = next((f for f in files if f.kind == "wheel"), None)
    source = next((f for f in files if f.kind == "sdist"), None) or next(
        (f for f in files if f.kind == "source"), None
    )
    index = f"/simple/{quote(env.owner)}/{quote(env.name)}/"
    return {
        "id": str(env.id),
        "environment_id": str(env.id),
        "version_id": str(version.id),
        "owner": {"name": env.owner},
        "name": env.name,
        "semantic_version": version.version,
        "version": version.version,
        "content_hash": bare_hash(version.content_hash),
        "visibility": visibility(env),
        "created_at": version.created_at,
        "yanked": bool(version.yanked),
        "install_index_url": absolute(views, index) if public else None,
        "simple_index_url": absolute(views, index) if public else None,
        "wheel_url": absolute(views, base + quote(wheel.filename)) if public and wheel else None,
        "wheel_sha256": wheel.sha256 if wheel else None,
        "package_url": absolute(views, base + quote(source.filename)) if source else None,
        "url_dependencies": [],
        "metadata": {
            "description": env.description or version.summary or "",
            "tags": json.loads(env.tags),
            "dependencies": json.loads(version.dependencies),
            "python_requires": version.requires_python,
        },
    }


def named_version(hub: Hub, env: EnvironmentRow, ref: str) -> VersionRow:
    if ref == "latest":
        if not env.latest_version:
            raise HubError(
                404,
                "version_not_found",
                f"{env.owner}/{env.name} has no installable version",
            )
        ref = env.latest_version
    return hub.version(env, ref)


@router.get("/environmentshub/{owner}/{name}/@{ref}")
def get_version(
    owner: str, name: str, ref: str, hub: HubDep, views: ViewsDep, user: MaybeUser
) -> dict[str, Any]:
    env = hub.environment(owner, name, user)
    return data(version_detail(hub, views, env, named_version(hub, env, ref)))


@router.get("/environmentshub/{owner}/{name}/status")
def status(owner: str, name: str, hub: HubDep, user: MaybeUser) -> dict[str, Any]:
    env = hub.environment(owner, name, user)
    latest = None
    if env.latest_version:
        v = hub.version(env, env.latest_version)
        latest = {
            "semantic_version": v.version,
            "content_hash": bare_hash(v.content_hash),
            "created_at": v.created_at,
        }
    return data(
        {
            "id": str(env.id),
            "owner": {"name": env.owner},
            "name": env.name,
            "description": env.description or "",
            "visibility": visibility(env),
            "latest_version": latest,
        }
    )


@router.get("/environmentshub/{owner}/{name}/versions")
def versions(owner: str, name: str, hub: HubDep, user: MaybeUser) -> dict[str, Any]:
    """Newest first; ``sha256`` is the version's content hash (what ``prime env version
    delete`` takes a prefix of), ``size`` its number of files."""
    env = hub.environment(owner, name, user)
    rows = list(reversed(hub.catalog.versions(env.id)))
    files = hub.catalog.files_of_versions([v.id for v in rows])
    return data(
        [
            {
                "id": str(v.id),
                "version": v.version,
                "semantic_version": v.version,
                "created_at": v.created_at,
                "sha256": bare_hash(v.content_hash),
                "content_hash": bare_hash(v.content_hash),
                "size": len(files[v.id]),
                "yanked": bool(v.yanked),
            }
            for v in rows
        ]
    )


# --- deleting (the same check and the same service as DELETE /api/v1/environments/...) ---------------
@router.delete("/environmentshub/{owner}/{name}")
def delete_environment(owner: str, name: str, user: User, hub: HubDep) -> dict[str, Any]:
    env = administered(hub, user, owner, name, "delete")
    hub.delete_environment(env)
    return data({"success": True})


@router.delete("/environmentshub/{owner}/{name}/@{content_hash}")
def delete_version(
    owner: str, name: str, content_hash: str, user: User, hub: HubDep
) -> dict[str, Any]:
    """The version whose content hash starts with ``content_hash`` (at least 8 hex digits;
    a prefix two versions share deletes neither)."""
    env = administered(hub, user, owner, name, "delete versions of")
    match = HASH_PREFIX.fullmatch(content_hash.lower())
    if match is None:
        raise HubError(
            400, "invalid_content_hash", "give at least 8 hex digits of the version's content hash"
        )
    prefix = match.group(1)
    found = [
        v for v in hub.catalog.versions(env.id) if bare_hash(v.content_hash).startswith(prefix)
    ]
    if not found:
        raise HubError(
            404, "version_not_found", f"{owner}/{name} has no version with content hash {prefix}"
        )
    if len(found) > 1:
        raise HubError(
            409,
            "ambiguous_content_hash",
            f"{prefix} is the content hash of versions "
            f"{', '.join(v.version for v in found)} (bumped copies share one); delete one "
            f"by version with this hub's CLI: prime env delete {owner}/{name}@VERSION --yes",
        )
    hub.delete_version(env, found[0].id)
    return data({"success": True, "version": found[0].version})
