"""Changing what the hub holds: publish a version, yank it, delete a version or an environment.

Who may do what is decided here, explicitly: members of a namespace (its user, its team's owners
and members) publish and attach results; yanking, deleting and managing members is for the
namespace's user or a team owner. Every check runs before an upload's body is read.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Request, Response

from hub_protocol.wire import VersionInfo, YankRequest
from hub_server.db.rows import EnvironmentRow
from hub_server.edges.uploads import admitted_form, required
from hub_server.errors import HubError
from hub_server.presenters.views import Views
from hub_server.routers.deps import HubDep, User, ViewsDep
from hub_server.routers.environments import version_infos
from hub_server.services import publishing
from hub_server.services.auth import Principal
from hub_server.services.hub import Hub
from hub_server.services.names import check_name, check_text

router = APIRouter(prefix="/api/v1/environments", tags=["publishing"])


@router.post("/{owner}/{name}/versions", response_model=VersionInfo, status_code=201)
async def publish(
    owner: str, name: str, request: Request, user: User, hub: HubDep, views: ViewsDep
) -> VersionInfo:
    """Multipart: ``wheel`` (and ``sdist``) files; ``visibility``, ``readme``, ``description``,
    ``tags`` (a JSON list) fields."""
    check_name(owner, "owner")
    check_name(name, "environment")
    await hub.read(hub.auth.require_publisher, user, owner, f"publish to the {owner!r} namespace")
    fields = ("visibility", "readme", "description", "tags")
    async with admitted_form(hub, request, user.user_id, ("wheel", "sdist"), fields) as form:
        visibility = form.fields.get("visibility")
        if visibility not in (None, "public", "private"):
            raise HubError(400, "invalid_visibility", "visibility must be public or private")
        tags = publish_tags(form.fields.get("tags"))
        for field in ("readme", "description"):
            check_text(form.fields.get(field), f"the {field}")
        details = publishing.PublishForm(
            visibility, form.fields.get("readme"), form.fields.get("description"), tags
        )
        return await hub.upload_work(
            publish_and_describe,
            views,
            user,
            owner,
            name,
            required(form, "wheel"),
            form.files.get("sdist"),
            details,
        )


MAX_TAGS, MAX_TAG_LENGTH = 20, 64


def publish_tags(raw: str | None) -> list[str]:
    """The ``tags`` field: a JSON list of strings, the first 20 kept, each at most 64
    characters (a tag is a key of an index; PostgreSQL's cannot hold a long one)."""
    try:
        tags = json.loads(raw or "[]")
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise TypeError
    except (json.JSONDecodeError, TypeError, RecursionError):
        raise HubError(400, "invalid_tags", "tags must be a JSON list of strings") from None
    for tag in tags[:MAX_TAGS]:
        check_text(tag, "a tag")
        if len(tag) > MAX_TAG_LENGTH:
            raise HubError(
                400, "invalid_tags", f"tag {tag[:20]!r}... is over {MAX_TAG_LENGTH} characters"
            )
    return tags[:MAX_TAGS]


def publish_and_describe(
    hub: Hub, views: Views, user: Principal, owner: str, name: str, wheel, sdist, details
) -> VersionInfo:
    """The publish and the reads that describe its result, all in the upload's thread: on
    PostgreSQL each read is a round trip that must not stall the event loop."""
    env_id, version_id = publishing.publish_version(hub, user, owner, name, wheel, sdist, details)
    env = hub.catalog.environment_by_id(env_id)
    assert env is not None  # just published, in this thread
    version = next(v for v in hub.catalog.versions(env_id) if v.id == version_id)
    (info,) = version_infos(hub, views, env, [version])
    return info


def administered(hub: HubDep, user: User, owner: str, name: str, what: str) -> EnvironmentRow:
    user.require("publish")
    env = hub.environment(owner, name, user)
    if not hub.auth.can_administer(user, owner):
        raise HubError(
            403,
            "not_owner",
            f"only {owner} (or an owner of team {owner}) can {what} {owner}/{name}",
        )
    return env


@router.post("/{owner}/{name}/versions/{version}/yank", response_model=VersionInfo)
def yank(
    owner: str, name: str, version: str, body: YankRequest, user: User, hub: HubDep, views: ViewsDep
) -> VersionInfo:
    env = administered(hub, user, owner, name, "yank versions of")
    check_text(body.reason, "the yank reason")
    v = hub.version(env, version)
    # PEP 592 yanking is reversible: the files are never removed
    hub.catalog.set_yanked(env.id, v.id, not body.undo, body.reason)
    (info,) = version_infos(hub, views, env, [hub.version(env, version)])
    return info


@router.delete("/{owner}/{name}", status_code=204)
def delete_environment(owner: str, name: str, user: User, hub: HubDep) -> Response:
    env = administered(hub, user, owner, name, "delete")
    hub.delete_environment(env)
    return Response(status_code=204)


@router.delete("/{owner}/{name}/versions/{version}", status_code=204)
def delete_version(owner: str, name: str, version: str, user: User, hub: HubDep) -> Response:
    """Only that version goes; its number stays taken (files are never replaced)."""
    env = administered(hub, user, owner, name, "delete versions of")
    hub.delete_version(env, hub.version(env, version).id)
    return Response(status_code=204)
