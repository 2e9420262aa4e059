"""Reading environments: search and listing (in SQL, paginated), one environment, its versions."""

from __future__ import annotations

from fastapi import APIRouter, Query

from hub_protocol.wire import EnvironmentInfo, EnvironmentPage, VersionInfo
from hub_server.auth import Principal, viewer_of
from hub_server.db.catalog import SORTS
from hub_server.errors import HubError
from hub_server.hub import Hub
from hub_server.routers.deps import HubDep, MaybeUser, ViewsDep
from hub_server.views import Views

router = APIRouter(prefix="/api/v1/environments", tags=["environments"])
ENV_SORTS = tuple(SORTS)
MAX_PAGE = 500  # deep pages cost OFFSET rows; refine the search instead


def environment_page(
    hub: Hub,
    user: Principal | None,
    q: str | None = None,
    owner: str | None = None,
    tag: str | None = None,
    sort: str = "updated",
    page: int = 1,
    per_page: int = 20,
) -> EnvironmentPage:
    if sort not in SORTS:
        raise HubError(400, "invalid_sort", f"sort must be one of {', '.join(SORTS)}")
    page, per_page = min(max(page, 1), MAX_PAGE), max(1, min(per_page, 100))
    hub.flush_downloads()  # this process's pending counts (a no-op when none are)
    rows, total = hub.catalog.search(viewer_of(user), q, owner, tag, sort, page, per_page)
    return EnvironmentPage(
        items=[Views.summary(r) for r in rows], total=total, page=page, per_page=per_page
    )


@router.get("", response_model=EnvironmentPage)
def list_environments(
    hub: HubDep,
    user: MaybeUser,
    q: str | None = Query(None, max_length=200),
    owner: str | None = None,
    tag: str | None = None,
    sort: str = "updated",
    page: int = 1,
    per_page: int = 20,
) -> EnvironmentPage:
    return environment_page(hub, user, q, owner, tag, sort, page, per_page)


@router.get("/{owner}/{name}", response_model=EnvironmentInfo)
def environment_info(
    owner: str, name: str, hub: HubDep, views: ViewsDep, user: MaybeUser
) -> EnvironmentInfo:
    env = hub.environment(owner, name, user)
    return EnvironmentInfo(
        **Views.summary(env).model_dump(),
        readme=env["readme"],
        versions=[v["version"] for v in hub.catalog.versions(env["id"])],
        index_url=views.url(f"/simple/{owner}/{name}/"),
    )


def version_infos(hub: Hub, views: Views, env, versions) -> list[VersionInfo]:
    files = hub.catalog.files_of_versions([v["id"] for v in versions])
    return [views.version(env, v, files[v["id"]]) for v in versions]


@router.get("/{owner}/{name}/versions", response_model=list[VersionInfo])
def list_versions(
    owner: str, name: str, hub: HubDep, views: ViewsDep, user: MaybeUser
) -> list[VersionInfo]:
    env = hub.environment(owner, name, user)
    return version_infos(hub, views, env, hub.catalog.versions(env["id"]))


@router.get("/{owner}/{name}/versions/{version}", response_model=VersionInfo)
def get_version(
    owner: str, name: str, version: str, hub: HubDep, views: ViewsDep, user: MaybeUser
) -> VersionInfo:
    env = hub.environment(owner, name, user)
    if version == "latest":
        if not env["latest_version"]:
            raise HubError(404, "version_not_found", f"{owner}/{name} has no installable version")
        version = env["latest_version"]
    (info,) = version_infos(hub, views, env, [hub.version(env, version)])
    return info
