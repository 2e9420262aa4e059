"""Reading an upload's multipart body, after the route has decided the caller may send it.

Upload routes take the raw request instead of ``File()`` parameters: the framework would parse
(and spool) the whole body before the route's scope and namespace checks could run. Here the
parser streams the body to temporary files (in memory up to 1 MiB, then on disk) with limits on
the number of parts, each field's size and each file's size; the ASGI guard caps the total.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from hub_server.background.upload_pool import Upload
from hub_server.errors import HubError
from hub_server.services.hub import Hub
from hub_server.settings import MAX_FIELD, MAX_FILE


@dataclass
class Form:
    files: dict[str, Upload] = field(default_factory=dict)
    fields: dict[str, str] = field(default_factory=dict)
    _raw: Any = None

    async def close(self) -> None:
        if self._raw is not None:
            await self._raw.close()


async def read_form(
    request: Request, files: tuple[str, ...], fields: tuple[str, ...] = (), max_file: int = MAX_FILE
) -> Form:
    try:
        raw = await request.form(
            max_files=len(files), max_fields=len(fields), max_part_size=MAX_FIELD
        )
    except HTTPException as exc:
        raise HubError(
            400, "invalid_form", f"the upload is not a valid form: {exc.detail}"
        ) from None
    form = Form(_raw=raw)
    for key, value in raw.multi_items():
        if isinstance(value, UploadFile):
            if key not in files or key in form.files:
                await form.close()
                raise HubError(400, "invalid_form", f"unexpected file part {key!r}")
            if (value.size or 0) > max_file:
                await form.close()
                raise HubError(
                    413,
                    "file_too_large",
                    f"{value.filename} is over {max_file // (1024 * 1024)} MiB",
                )
            form.files[key] = Upload(value.filename or "", value.file)
        elif key in fields:
            form.fields[key] = value
        else:
            await form.close()
            raise HubError(400, "invalid_form", f"unexpected field {key!r}")
    return form


@asynccontextmanager
async def admitted_form(
    hub: Hub, request: Request, holder: int, files: tuple[str, ...], fields: tuple[str, ...] = ()
) -> AsyncIterator[Form]:
    """An upload's form, read once the hub admits the upload of the user ``holder``
    (``Hub.upload_slot``: as many at once as there are upload workers, one user all but one of
    them; the rest wait before their body is read), and closed after the work on it."""
    async with hub.upload_slot(holder):
        form = await read_form(request, files, fields)
        try:
            yield form
        finally:
            await form.close()


def required(form: Form, name: str) -> Upload:
    if name not in form.files:
        raise HubError(400, "invalid_form", f"the upload has no {name!r} file")
    return form.files[name]
