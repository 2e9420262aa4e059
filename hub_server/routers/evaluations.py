"""The evaluations API that Prime Intellect's official ``prime`` CLI speaks (``prime eval push``,
``list``, ``get``, ``samples``; prime-evals 0.2.4): ``/api/v1/evaluations/...``.

Only the wire is new here (``hub_server.services.official_evals`` holds the work): an
evaluation is an eval attached to a version, by the native attach's own service, under its
rules (the ``publish`` scope and the namespace to attach, the environment's visibility to
read, the same quota per version). Answers are top-level objects, as this client reads them
(no ``{"data": ...}`` envelope); errors carry ``detail`` beside ``error.code``.
"""

from __future__ import annotations

import tempfile
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from hub_server.background.upload_pool import Upload
from hub_server.db.rows import PlacedEvalRow
from hub_server.errors import HubError
from hub_server.presenters.views import Views
from hub_server.routers.deps import HubDep, MaybeUser, User, ViewsDep
from hub_server.routers.environmentshub import absolute
from hub_server.services import official_evals
from hub_server.services.names import check_name

router = APIRouter(prefix="/api/v1/evaluations", tags=["evaluations api (official prime CLI)"])


class CreateRequest(BaseModel):
    """What ``prime eval push`` sends to create (its other fields are read and ignored)."""

    model_config = ConfigDict(extra="ignore")

    name: str | None = Field(None, max_length=500)
    environments: list[dict[str, Any]] | None = None
    run_id: str | None = None
    model_name: str | None = None
    metadata: dict[str, Any] | None = None
    metrics: dict[str, Any] | None = None
    is_public: bool | None = None


def viewer_url(views: Views, public_id: str) -> str | None:
    """The eval on the hub's own pages (``/dashboard/evaluations/ID`` redirects to its
    environment's page)."""
    return absolute(views, f"/dashboard/evaluations/{quote(public_id)}")


@router.post("/")
def create(body: CreateRequest, user: User, hub: HubDep, views: ViewsDep) -> dict[str, Any]:
    """Open an evaluation for a run, checked as the native attach checks it (the version is
    the run's ``metadata.env_version``); nothing is visible until its finalize."""
    if body.metadata is None:
        raise HubError(400, "unverified_run", "the evaluation has no metadata (metadata.json)")
    meta = official_evals.run_metadata(body.metadata, body.metrics)
    staged_id, env, v = official_evals.open_eval(
        hub, user, body.environments or [], meta, body.is_public
    )
    return {
        "evaluation_id": staged_id,
        "id": staged_id,
        "name": body.name,
        "status": "PENDING",
        "environment_names": [f"{env.owner}/{env.name}"],
        "version": v.version,
        "is_public": env.visibility == "public",
        "viewer_url": viewer_url(views, staged_id),
    }


@router.post("/{evaluation_id}/samples")
async def push_samples(
    evaluation_id: str, request: Request, user: User, hub: HubDep
) -> dict[str, Any]:
    """A batch ``{"samples": [...]}`` (up to 25 MB; batches come concurrently, in any order)."""
    await run_in_threadpool(official_evals.own_open_eval, hub, user, evaluation_id)
    async with hub.upload_slot(user.user_id):
        with tempfile.SpooledTemporaryFile(max_size=1024 * 1024) as spool:
            async for chunk in request.stream():  # the guard caps the body
                spool.write(chunk)
            count = await hub.upload_work(
                official_evals.store_batch,
                user,
                evaluation_id,
                Upload("samples.json", spool),  # type: ignore[arg-type]
            )
    return {"success": True, "samples_pushed": count}


@router.post("/{evaluation_id}/finalize")
async def finalize(evaluation_id: str, user: User, hub: HubDep, views: ViewsDep) -> dict[str, Any]:
    """Attach the run (the native attach's service, one transaction); a retry answers the
    same. The body's ``metrics`` are not read: the summary is recomputed from the samples."""
    await run_in_threadpool(official_evals.own_open_eval, hub, user, evaluation_id)
    async with hub.upload_slot(user.user_id):
        eval_id = await hub.upload_work(official_evals.finalize, user, evaluation_id)
    return {
        "success": True,
        "evaluation_id": evaluation_id,
        "id": evaluation_id,
        "eval_id": eval_id,
        "status": "COMPLETED",
        "viewer_url": viewer_url(views, evaluation_id),
    }


def described(views: Views, row: PlacedEvalRow) -> dict[str, Any]:
    public_id = row.alias or str(row.id)
    summary = official_evals.summary_of(row)
    return {
        "evaluation_id": public_id,
        "id": public_id,
        "eval_id": row.id,
        "name": f"{row.owner}/{row.name}-{row.model or 'model'}",
        "status": "COMPLETED",
        "environment_names": [f"{row.owner}/{row.name}"],
        "environments": [{"id": str(row.env_id), "name": f"{row.owner}/{row.name}"}],
        "version": row.version,
        "model_name": row.model,
        "uploaded_by": row.uploaded_by,
        "created_at": row.created_at,
        "is_public": row.visibility == "public",
        "is_hosted": False,
        "total_samples": row.num_rollouts,
        "metrics": summary,
        "metadata": {
            "num_examples": summary.get("num_examples"),
            "rollouts_per_example": (
                row.num_rollouts // summary["num_examples"] if summary.get("num_examples") else None
            ),
        },
        "viewer_url": viewer_url(views, public_id),
    }


@router.get("/")
def list_evaluations(
    user: User,
    hub: HubDep,
    views: ViewsDep,
    skip: int = Query(0, ge=0, le=100_000),
    limit: int = Query(50, ge=1, le=100),
    environment_name: str | None = Query(None, max_length=200),
    team_id: str | None = Query(None, max_length=100),
    suite_id: str | None = None,
) -> dict[str, Any]:
    """The caller's own evaluations, newest first (a team's with ``team_id``: its members');
    ``environment_name`` is NAME or OWNER/NAME."""
    if suite_id is not None:
        raise HubError(400, "unsupported_filter", "this hub has no evaluation suites")
    owner = name = None
    if environment_name:
        owner, _, name = environment_name.rpartition("/")
        owner = owner or None
        check_name(name, "environment")
        if owner is not None:
            check_name(owner, "owner")
    uploaded_by: str | None = user.name
    if team_id:
        check_name(team_id, "team")
        if not hub.auth.can_publish(user, team_id):
            raise HubError(403, "not_owner", f"only {team_id}'s members list its evaluations")
        if owner not in (None, team_id):
            return {"evaluations": [], "total": 0, "skip": skip, "limit": limit}
        owner, uploaded_by = team_id, None
    rows, total = hub.staged_evals.listing(user.viewer(), uploaded_by, owner, name, skip, limit)
    return {
        "evaluations": [described(views, r) for r in rows],
        "total": total,
        "skip": skip,
        "limit": limit,
    }


@router.get("/{evaluation_id}")
def get_evaluation(
    evaluation_id: str, user: MaybeUser, hub: HubDep, views: ViewsDep
) -> dict[str, Any]:
    row = official_evals.readable(hub, user, evaluation_id)
    answer = described(views, row)
    answer["metadata"] = {**official_evals.run_of(hub, row), **answer["metadata"]}
    return answer


@router.get("/{evaluation_id}/samples")
def get_samples(
    evaluation_id: str,
    user: MaybeUser,
    hub: HubDep,
    page: int = Query(1, ge=1, le=1_000_000),
    limit: int = Query(100, ge=1, le=500),
) -> dict[str, Any]:
    row = official_evals.readable(hub, user, evaluation_id)
    samples = official_evals.samples_of(hub, row, (page - 1) * limit, limit)
    return {"samples": samples, "total": row.num_rollouts, "page": page, "limit": limit}
