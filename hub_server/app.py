"""The Environments Hub server: a JSON API, per-environment PEP 503/691 simple indexes, web pages.

Standards first: wheels and sdists as built by ``uv build``; PEP 440 versions; a simple index
per environment (``/simple/{owner}/{name}/``) with sha256 fragments, PEP 658/714 metadata
files, PEP 700 upload times and PEP 592 yanking; immutable files. The JSON API adds owners,
tokens, search, READMEs and eval results attached to exact versions. Every error carries a
stable ``code``.

This module only wires the rooms together: ``routers/`` (one per resource), ``edges/`` (the
ASGI guard, fast paths, uploads), ``presenters/`` (wire models, pages), ``services/`` (the hub's
state, auth, publishing, ...), ``background/`` (upload workers), ``db/`` (SQL and blobs).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from hub_server.edges.guard import RequestGuard
from hub_server.edges.transport_security import StrictTransportSecurity
from hub_server.errors import install_error_handlers
from hub_server.presenters.views import Views
from hub_server.routers import (
    accounts,
    attachments,
    auth_challenge,
    dashboard,
    environments,
    environmentshub,
    environmentshub_push,
    evaluations,
    publishing,
    sdk,
    simple,
    web,
)
from hub_server.services import official_evals
from hub_server.services.blob_collection import collect_periodically
from hub_server.services.hub import Hub
from hub_server.services.sdk import SDKWheels
from hub_server.settings import MAX_FILE, HubSettings


def create_app(settings: HubSettings | str | Path, sdk_wheel: str | Path | None = None) -> FastAPI:
    """``settings``: a ``HubSettings`` or just the data directory (embedded backends)."""
    if not isinstance(settings, HubSettings):
        settings = HubSettings(
            data_dir=Path(settings), sdk_wheel=Path(sdk_wheel) if sdk_wheel else None
        )
    hub = Hub(settings)
    app = FastAPI(title="Environments Hub", version="1", description=__doc__)
    app.state.hub = hub
    app.state.views = Views(settings.public_url)
    app.state.sdk = SDKWheels(settings.data_dir, settings.sdk_wheel, settings.build_sdk)
    install_error_handlers(app)
    rooms = (
        simple,
        accounts,
        environments,
        publishing,
        attachments,
        environmentshub,
        environmentshub_push,
        evaluations,
        sdk,
        auth_challenge,
        dashboard,
        web,
    )
    for room in rooms:  # hot first
        app.include_router(room.router)
    app.router.on_startup.append(app.state.sdk.start)
    app.router.on_startup.append(hub.accounts.purge_sessions)
    app.router.on_startup.append(hub.start_upload_workers)
    collected = threading.Event()  # set: the collector of orphan blobs and staged uploads stops
    app.router.on_startup.append(lambda: collect_periodically(hub, collected))
    app.router.on_shutdown.append(collected.set)
    if hub.database.generation_reads is not None:  # its connection, closed on its loop
        app.router.on_shutdown.append(hub.database.generation_reads.aclose)
    app.router.on_shutdown.append(hub.close)
    app.add_middleware(environmentshub_push.StagedFastPath, hub=hub, views=app.state.views)
    app.add_middleware(environments.SearchFastPath, hub=hub)
    app.add_middleware(web.PageFastPath, hub=hub, views=app.state.views)
    app.add_middleware(
        RequestGuard,
        authenticate=lambda scope, headers: hub.auth.from_token(
            hub.auth.credential(scope["path"], scope["method"], headers)
        ),
        upload_limit=2 * MAX_FILE + 1024 * 1024,
        upload_url_limit=MAX_FILE,
        samples_limit=official_evals.MAX_BATCH,
        read_timeout=settings.read_timeout,
    )
    app.add_middleware(StrictTransportSecurity)  # outermost: fast paths and refusals too
    return app


def served(app: FastAPI) -> Any:
    """What ``prime hub serve`` runs: ``app`` behind the simple index's fast path
    (``simple.IndexFastPath``, ahead of the framework: the request every install makes), with
    HSTS over both (the app's own answers carry it once)."""
    return StrictTransportSecurity(simple.IndexFastPath(app, app.state.hub))
