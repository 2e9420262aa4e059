"""This SDK's own wheel for other machines (``hub_server.services.sdk``) and the hub's health check."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse

from hub_server.errors import HubError
from hub_server.routers.deps import ViewsDep
from hub_server.services.sdk import LOCAL_STACK_COMMAND, SDKWheel, SDKWheelUnavailable

router = APIRouter(tags=["sdk"])


def served(request: Request) -> SDKWheel:
    try:
        return request.app.state.sdk.get()
    except SDKWheelUnavailable as exc:
        raise HubError(404, "sdk_unavailable", str(exc)) from None


@router.get("/sdk/")
def sdk_info(request: Request, views: ViewsDep) -> dict[str, str]:
    wheel = served(request)
    if not views.base:
        raise HubError(
            404,
            "sdk_unavailable",
            "the install line needs the hub's own URL: start it with --public-url https://HUB",
        )
    return {
        "version": wheel.version,
        "filename": wheel.filename,
        "sha256": wheel.sha256,
        "url": views.url(f"/sdk/{wheel.filename}"),
        "install": wheel.install_command(views.base),
        "local_models": LOCAL_STACK_COMMAND,  # then, to run models here: torch and the embedded one
    }


@router.get("/sdk/{filename}")
def sdk_download(filename: str, request: Request) -> Response:
    wheel = served(request)
    if filename != wheel.filename:
        raise HubError(
            404, "file_not_found", f"no file {filename}; this hub serves {wheel.filename}"
        )
    return FileResponse(wheel.path, media_type="application/octet-stream")


@router.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}
