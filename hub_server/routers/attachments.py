"""What attaches to a version: eval results (``prime eval push``) and datasets (``prime data push``).

Only the namespace's user and members attach, each upload is checked before its body is read,
quotas hold under concurrency (checked in the inserting transaction), and the numbers shown are
recomputed from the uploaded rows (``hub_server.services.attaching``).
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from hub_protocol.wire import AttachmentKind, DatasetInfo, EvalInfo
from hub_server.db.attachments import NewDataset
from hub_server.db.rows import EnvironmentRow, VersionRow
from hub_server.edges.uploads import admitted_form, required
from hub_server.errors import HubError
from hub_server.presenters.views import Views
from hub_server.routers.deps import HubDep, MaybeUser, User, ViewsDep
from hub_server.services import attaching
from hub_server.services.auth import Principal
from hub_server.services.hub import Hub
from hub_server.services.names import check_text

router = APIRouter(
    prefix="/api/v1/environments/{owner}/{name}/versions/{version}", tags=["attachments"]
)
MAX_DATASETS_PER_VERSION = 20


def attach_target(
    hub: Hub, user: Principal, owner: str, name: str, version: str, what: AttachmentKind
) -> tuple[EnvironmentRow, VersionRow]:
    hub.auth.require_publisher(user, owner, f"attach {what} to {owner}/{name}")
    env = hub.environment(owner, name, user)
    return env, hub.version(env, version)


@router.post("/evals", response_model=EvalInfo, status_code=201)
async def upload_eval(
    owner: str, name: str, version: str, request: Request, user: User, hub: HubDep
) -> EvalInfo:
    env, v = await run_in_threadpool(attach_target, hub, user, owner, name, version, "evals")
    async with admitted_form(hub, request, user.user_id, ("metadata", "results")) as form:
        row = await hub.upload_work(
            attaching.store_eval,
            user,
            env,
            v,
            required(form, "metadata"),
            required(form, "results"),
        )
    return Views.eval(env, v.version, row)


@router.get("/evals", response_model=list[EvalInfo])
def list_evals(owner: str, name: str, version: str, user: MaybeUser, hub: HubDep) -> list[EvalInfo]:
    env = hub.environment(owner, name, user)
    v = hub.version(env, version)
    return [Views.eval(env, v.version, r) for r in hub.attachments.evals([v.id])]


@router.post("/datasets", response_model=DatasetInfo, status_code=201)
async def upload_dataset(
    owner: str, name: str, version: str, request: Request, user: User, hub: HubDep, views: ViewsDep
) -> DatasetInfo:
    """Every run the dataset came from must have run this version's code (as for evals)."""
    env, v = await run_in_threadpool(attach_target, hub, user, owner, name, version, "datasets")
    async with admitted_form(hub, request, user.user_id, ("card", "data")) as form:
        row = await hub.upload_work(
            store_dataset, user, env, v, required(form, "card"), required(form, "data")
        )
    return views.dataset(env, v.version, row)


def store_dataset(hub: Hub, user: Principal, env: EnvironmentRow, v: VersionRow, card, data):
    card.file.seek(0)
    card_bytes = card.file.read(attaching.MAX_METADATA + 1)
    try:
        info = json.loads(card_bytes)
        sources, rows, spec = info["sources"], int(info["rows"]), info["filter"]
        if not isinstance(sources, list) or not all(isinstance(s, dict) for s in sources):
            raise TypeError("sources is not a list of runs")
    except (json.JSONDecodeError, KeyError, TypeError, ValueError, RecursionError) as exc:
        raise HubError(
            400, "invalid_dataset", f"vf_data.json is not a vf-data card: {exc}"
        ) from None
    if not sources:
        raise HubError(400, "invalid_dataset", "the dataset names no source run")
    for source in sources:
        attaching.check_run_matches({**source, "run_id": source.get("run_id") or "?"}, env, v)
    description = str(info.get("description") or json.dumps(spec, sort_keys=True))[:2000]
    check_text(description, "vf_data.json's description")
    digest = attaching.check_parquet(data.file, rows)
    with hub.leased_blobs() as blobs:  # each leased before it is written: see blob_leases
        new = NewDataset(
            version_id=v.id,
            uploaded_by=user.name,
            rows=rows,
            filter=description,
            models=sorted({str(s.get("model")) for s in sources}),
            card_blob=blobs.put(card_bytes),
            data_blob=blobs.put_file(data.file, digest),
            data_sha256=digest,
        )
        return hub.attachments.add_dataset(new, MAX_DATASETS_PER_VERSION, blobs.give_back)


@router.get("/datasets", response_model=list[DatasetInfo])
def list_datasets(
    owner: str, name: str, version: str, user: MaybeUser, hub: HubDep, views: ViewsDep
) -> list[DatasetInfo]:
    env = hub.environment(owner, name, user)
    v = hub.version(env, version)
    return [views.dataset(env, v.version, r) for r in hub.attachments.datasets(v.id)]


@router.get("/datasets/{dataset_id}/data.parquet")
def download_dataset(
    owner: str, name: str, version: str, dataset_id: int, user: MaybeUser, hub: HubDep
) -> Response:
    env = hub.environment(owner, name, user)
    v = hub.version(env, version)
    row = hub.attachments.dataset(v.id, dataset_id)
    if row is None:
        raise HubError(
            404, "dataset_not_found", f"no dataset #{dataset_id} on {owner}/{name} {version}"
        )
    return Response(hub.blobs.get(row.data_blob), media_type="application/octet-stream")
