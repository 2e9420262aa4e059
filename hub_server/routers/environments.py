"""Reading environments: search and listing (in SQL, paginated), one environment, its versions."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from hub_protocol.wire import (
    LIST_INT_PARAMS,
    LIST_TEXT_PARAMS,
    SORTS,
    EnvironmentInfo,
    EnvironmentPage,
    ListQuery,
    VersionInfo,
)
from hub_server.db.rows import EnvironmentRow, SummaryRow, VersionRow
from hub_server.db.search import Answer
from hub_server.edges.fastpath import error_json, request_headers, respond
from hub_server.errors import HubError
from hub_server.presenters.views import Views
from hub_server.routers.deps import HubDep, MaybeUser, ViewsDep
from hub_server.services.auth import Principal, viewer_of
from hub_server.services.hub import Hub
from hub_server.services.names import check_text

router = APIRouter(prefix="/api/v1/environments", tags=["environments"])
MAX_PAGE = 500  # deep pages cost OFFSET rows; refine the search instead
MAX_QUERY = 200


def page_bounds(sort: str, page: int, per_page: int) -> tuple[int, int]:
    if sort not in SORTS:
        raise HubError(400, "invalid_sort", f"sort must be one of {', '.join(SORTS)}")
    return min(max(page, 1), MAX_PAGE), max(1, min(per_page, 100))


def check_filters(q: str | None, owner: str | None, tag: str | None) -> None:
    """A filter the hub could not have stored is refused, not looked up."""
    for field, value in (("q", q), ("owner", owner), ("tag", tag)):
        check_text(value, f"the {field} filter")


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
    page, per_page = page_bounds(sort, page, per_page)
    check_filters(q, owner, tag)
    hub.flush_downloads()  # this process's pending counts (a no-op when none are)
    rows, total = hub.search.page(viewer_of(user), q, owner, tag, sort, page, per_page)
    return listing(rows, total, page, per_page)


def listing(rows: list[SummaryRow], total: int, page: int, per_page: int) -> EnvironmentPage:
    return EnvironmentPage(
        items=[Views.summary(r) for r in rows], total=total, page=page, per_page=per_page
    )


async def environment_page_json(hub: Hub, user: Principal | None, query: dict[str, Any]) -> bytes:
    """``environment_page`` for the fast path: a search made since the last change is answered
    on the loop from the cache (one indexed read, on PostgreSQL shared by the requests waiting);
    anything else goes to a worker thread."""
    given = ListQuery.model_construct(**query)  # the defaults are the protocol's (ListQuery)
    sort = given.sort
    page, per_page = page_bounds(sort, given.page, given.per_page)
    viewer = viewer_of(user)
    check_filters(query.get("q"), query.get("owner"), query.get("tag"))
    args = (query.get("q"), query.get("owner"), query.get("tag"), sort, page, per_page)
    answer: Answer | None = None
    if not hub.downloads_pending():
        answer = await hub.search.known(viewer, *args)
        if answer is None:
            answer = await hub.read(hub.search.cached, viewer, *args)
    if answer is None:
        answer = await run_in_threadpool(_flushed_page, hub, viewer, args)
    rows, total = answer
    return rendered(answer, lambda: listing(rows, total, page, per_page).model_dump_json().encode())


_RENDERED: OrderedDict[int, tuple[Any, bytes]] = OrderedDict()
RENDERED_ENTRIES = 512


def rendered(answer: Any, render: Callable[[], bytes]) -> bytes:
    """The JSON of a cached answer, made once: kept beside the answer object itself (an answer
    is cached for one query and one generation), so a hit builds no summaries."""
    entry = _RENDERED.get(id(answer))
    if entry is not None and entry[0] is answer:
        _RENDERED.move_to_end(id(answer))
        return entry[1]
    body = render()
    _RENDERED[id(answer)] = (answer, body)
    while len(_RENDERED) > RENDERED_ENTRIES:
        _RENDERED.popitem(last=False)
    return body


def _flushed_page(hub: Hub, viewer: Any, args: tuple) -> Answer:
    hub.flush_downloads()
    return hub.search.page(viewer, *args)


@router.get("", response_model=EnvironmentPage)
def list_environments(
    hub: HubDep,
    user: MaybeUser,
    q: str | None = Query(None, max_length=MAX_QUERY),
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
        readme=env.readme,
        versions=[v.version for v in hub.catalog.versions(env.id)],
        index_url=views.url(f"/simple/{owner}/{name}/"),
    )


def version_infos(
    hub: Hub, views: Views, env: EnvironmentRow, versions: list[VersionRow]
) -> list[VersionInfo]:
    files = hub.catalog.files_of_versions([v.id for v in versions])
    return [views.version(env, v, files[v.id]) for v in versions]


@router.get("/{owner}/{name}/versions", response_model=list[VersionInfo])
def list_versions(
    owner: str, name: str, hub: HubDep, views: ViewsDep, user: MaybeUser
) -> list[VersionInfo]:
    env = hub.environment(owner, name, user)
    return version_infos(hub, views, env, hub.catalog.versions(env.id))


@router.get("/{owner}/{name}/versions/{version}", response_model=VersionInfo)
def get_version(
    owner: str, name: str, version: str, hub: HubDep, views: ViewsDep, user: MaybeUser
) -> VersionInfo:
    env = hub.environment(owner, name, user)
    if version == "latest":
        if not env.latest_version:
            raise HubError(404, "version_not_found", f"{owner}/{name} has no installable version")
        version = env.latest_version
    (info,) = version_infos(hub, views, env, [hub.version(env, version)])
    return info


def search_query(raw: bytes) -> dict[str, Any] | None:
    """The listing's parameters as the route reads them (the last of repeated ones wins), or
    None where only the route's validation can answer (a malformed number, a long query)."""
    query: dict[str, Any] = {}
    for key, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True):
        if key in LIST_TEXT_PARAMS:
            query[key] = value
        elif key in LIST_INT_PARAMS:
            if not (value.isascii() and value.lstrip("-").isdigit()) or len(value) > 9:
                return None
            query[key] = int(value)
    if len(query.get("q") or "") > MAX_QUERY:
        return None
    return query


class SearchFastPath:
    """ASGI: ``GET /api/v1/environments``, the search every page and ``prime env search`` make,
    answered without the framework's routing, dependency solving and response validation; the
    answer and its checks are ``environment_page``'s (the route stays, and serves whatever this
    does not take)."""

    def __init__(self, app: Any, hub: Hub) -> None:
        self.app, self.hub = app, hub

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"] != router.prefix:
            return await self.app(scope, receive, send)
        query = search_query(scope["query_string"])
        if query is None:
            return await self.app(scope, receive, send)
        try:
            token = self.hub.auth.credential(scope["path"], "GET", request_headers(scope))
            user = await self.hub.read(self.hub.auth.from_token, token) if token else None
            body, status = await environment_page_json(self.hub, user, query), 200
        except HubError as exc:
            body, status = error_json(exc), exc.status
        await respond(send, status, "application/json", body)
