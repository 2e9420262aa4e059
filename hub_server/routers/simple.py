"""The package index installers read (PEP 503 HTML, PEP 691 JSON, PEP 658 metadata, PEP 700
upload times, PEP 592 yanking) and the file downloads it links to.

Links are path-absolute, so a page never depends on the request's ``Host`` header. Rendered pages
are kept in memory keyed by the environment's id (never given to another environment) and its
``serial``, which every change bumps in the same transaction (``hub.index_key``), so a page is
never stale, even across hub processes, nor another environment's; the access check still runs
on every request.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request, Response
from packaging.utils import canonicalize_name
from starlette.concurrency import run_in_threadpool

from hub_server.db.rows import IndexHead
from hub_server.edges.fastpath import error_json, respond, some_headers
from hub_server.errors import HubError
from hub_server.presenters.templates import templates
from hub_server.routers.deps import HubDep, MaybeUser
from hub_server.services.hub import Hub, index_key

router = APIRouter(tags=["simple index"])
PEP691 = "application/vnd.pypi.simple.v1+json"
INDEX_HEADERS = frozenset({b"authorization", b"accept"})  # all that a page depends on


def wants_json(request: Request) -> bool:
    return PEP691 in request.headers.get("accept", "")


@router.get("/simple/{owner}/{name}/")
async def simple_root(
    owner: str, name: str, request: Request, hub: HubDep, user: MaybeUser
) -> Response:
    env = await hub.read(hub.environment, owner, name, user)
    if wants_json(request):
        body = {"meta": {"api-version": "1.1"}, "projects": [{"name": env.distribution}]}
        return Response(json.dumps(body), media_type=PEP691)
    page = templates.get_template("simple_root.html").render(
        project=quote(canonicalize_name(env.distribution)), distribution=env.distribution
    )
    return Response(page, media_type="text/html")


async def project_page(
    hub: Hub, owner: str, name: str, project: str, headers: Any
) -> tuple[bytes, str]:
    """One project's page and its media type, for the user the headers' credentials name."""
    token = hub.auth.credential(f"/simple/{owner}/", "GET", headers)
    user = await hub.read(hub.auth.from_token, token) if token else None
    env = await hub.read(hub.index_environment, owner, name, user)
    if project != env.distribution and canonicalize_name(project) != canonicalize_name(
        env.distribution
    ):
        raise HubError(404, "project_not_found", f"this index only serves {env.distribution}")
    as_json = PEP691 in headers.get("accept", "")
    key = index_key(env, as_json)
    body = hub.index_cache.get(key)
    if body is None:
        body = await run_in_threadpool(hub.cached_page, key, lambda: render(hub, env, as_json))
    return body, PEP691 if as_json else "text/html"


@router.get("/simple/{owner}/{name}/{project}/")
async def simple_project(owner: str, name: str, project: str, request: Request) -> Response:
    """Served by ``IndexFastPath`` in a running hub; this route documents it, serves it where
    the app runs without it (``create_app`` alone) and answers the failures it leaves here."""
    body, media = await project_page(request.app.state.hub, owner, name, project, request.headers)
    return Response(body, media_type=media)


class IndexFastPath:
    """ASGI, ahead of the framework (``app.served``): ``GET /simple/OWNER/NAME/PROJECT/``,
    the request every install makes, answered without its routing, dependency solving and
    middleware, which cost more than the answer (a cached page); the page and its checks are
    ``project_page``, the same as the route's. A failure other than the hub's own errors (the
    database unreachable) is left to the route, whose error handlers answer it."""

    def __init__(self, app: Any, hub: Hub) -> None:
        self.app, self.hub = app, hub

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        parts = scope["path"].split("/") if scope["type"] == "http" else []
        if (
            scope.get("method") != "GET"
            or len(parts) != 6
            or parts[1] != "simple"
            or parts[5] != ""
            or not all(parts[2:5])
        ):
            return await self.app(scope, receive, send)
        owner, name, project = parts[2:5]
        try:
            headers = some_headers(scope, INDEX_HEADERS)
            body, media = await project_page(self.hub, owner, name, project, headers)
            status = 200
        except HubError as exc:
            body, media, status = error_json(exc), "application/json", exc.status
        except Exception:  # the route answers it, through the error handlers
            return await self.app(scope, receive, send)
        await respond(send, status, media, body)


def render(hub: Hub, env: IndexHead, as_json: bool) -> bytes:
    prefix = f"/files/{quote(env.owner)}/{quote(env.name)}/"
    files = [
        {
            "filename": r.filename,
            "url": prefix + quote(r.filename),
            "sha256": r.sha256,
            "size": r.size,
            "upload_time": r.upload_time,
            "version": r.version,
            "requires_python": r.requires_python,
            "metadata_sha256": r.metadata_sha256,
            "yanked": bool(r.yanked),
            "yanked_reason": r.yanked_reason,
        }
        for r in hub.index.rows(env.id)
    ]
    if not as_json:
        return templates.get_template("simple_project.html").render(files=files).encode()
    entries = []
    for f in files:
        entry = {
            "filename": f["filename"],
            "url": f["url"],
            "hashes": {"sha256": f["sha256"]},
            "upload-time": f["upload_time"],
            "size": f["size"],
            "yanked": (f["yanked_reason"] or True) if f["yanked"] else False,
        }
        if f["requires_python"]:
            entry["requires-python"] = f["requires_python"]
        if f["metadata_sha256"]:
            entry["core-metadata"] = {"sha256": f["metadata_sha256"]}
            entry["dist-info-metadata"] = {"sha256": f["metadata_sha256"]}
        entries.append(entry)
    versions = list(dict.fromkeys(f["version"] for f in files))
    body = {
        "meta": {"api-version": "1.1"},
        "name": canonicalize_name(env.distribution),
        "files": entries,
        "versions": versions,
    }
    return json.dumps(body).encode()


@router.get("/files/{owner}/{name}/{filename}")
def download(owner: str, name: str, filename: str, hub: HubDep, user: MaybeUser) -> Response:
    env = hub.environment(owner, name, user)
    metadata = filename.endswith(".metadata")
    row = hub.catalog.file(env.id, filename.removesuffix(".metadata") if metadata else filename)
    if row is None or (metadata and not row.metadata_blob):
        raise HubError(404, "file_not_found", f"no file {filename}")
    if not metadata:
        hub.count_download(env.id, user.user_id if user else None)
    # (a metadata file whose version has no metadata blob was refused above)
    data = hub.blobs.get(row.metadata_blob if metadata and row.metadata_blob else row.blob)
    return Response(data, media_type="text/plain" if metadata else "application/octet-stream")
