"""vf-eval's built-in model server, for a run given no endpoint (``-b``): the embedded model or a
local model directory (hashed, so a run names the exact checkpoint), served by ``vf-serve``."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

from rich.console import Console

from verifiers.cli.endpoints import CLIError, Endpoint, resolve_endpoint
from verifiers.cli.eval.settings import EvalSettings
from verifiers.workers.runner import KEY_VAR as WORKER_KEY_VAR

V1_MAX_TOKENS = 256
"""The per-reply token limit a v1 taskset's run on the built-in model server gets when neither
-t, --sampling-args nor its package's ``[tool.verifiers.eval]`` table sets one: the limit
every classic environment here and both vf-init scaffolds ship in that table. Upstream's v1
packages ship no table; without a limit, a reply on CPU runs to the model's context length
(minutes each)."""


def local_model_identity(model: str, console: Console) -> dict[str, str] | None:
    """The path and content hash of a local model directory (None for the embedded model)."""
    path = Path(model).expanduser()
    if not path.is_dir():
        return None
    from verifiers.local_model.models import model_dir_sha256

    with console.status(f"hashing {path}"):
        return {"model_path": str(path.resolve()), "model_sha256": model_dir_sha256(path)}


def run_endpoint(
    args: EvalSettings, recorded: Any, previous: dict[str, Any], key_var: str, workers: Any
) -> tuple[Endpoint, str | None]:
    """The run's endpoint (``-b``, an alias, or the built-in server, not started yet: see
    ``resolve_endpoint``) and, for the built-in server, the key made for it. Call before any
    worker starts (``builtin_server_key``)."""
    endpoint = resolve_endpoint(
        args.model or (recorded.model if recorded else previous.get("model")),
        args.api_base_url or (recorded.base_url if recorded else None),
        key_var,
        args.endpoints,
    )
    return endpoint, builtin_server_key(workers) if endpoint.base_url is None else None


def builtin_server_key(workers: Any) -> str | None:
    """A key made for this run's built-in model server, so no other local user can query the
    model it serves, put in ``VF_ENV_WORKER_API_KEY`` of this process, which its local
    environment workers (forked, or a template's) and a Ray instance it starts inherit: call it
    before they start. None for workers behind a ``vf-env-server`` (``tcp://``), which read keys
    only from the variables it was started with: that server's workers call the built-in server
    without a key, so it is left without one (SECURITY.md)."""
    if isinstance(workers, tuple):
        return None
    key = secrets.token_urlsafe(32)
    os.environ[WORKER_KEY_VAR] = key
    return key


def start_embedded(
    endpoint: Endpoint,
    console: Console,
    args: EvalSettings,
    servers: list[Any],
    local: dict[str, str] | None,
    api_key: str | None = None,
) -> Endpoint:
    from verifiers.installs.sdk_guard import LOCAL_STACK_HINT
    from verifiers.processes.server import start_server

    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise CLIError(
            f"no endpoint given (-b) and the built-in model server needs {exc.name}: "
            f"{LOCAL_STACK_HINT}; or pass -b URL for another server"
        ) from exc
    log = Path(args.output_dir) / "logs" / f"vf-serve-{os.getpid()}.log"
    extra_args = []
    if local is not None:  # served (and filed) as <dir name>-<hash>: checkpoints stay apart
        extra_args = [
            "--served-model-name",
            f"{Path(local['model_path']).name}-{local['model_sha256'][:8]}",
        ]
    with console.status(f"starting the built-in model server ({endpoint.model}); log: {log}"):
        try:
            server = start_server(
                endpoint.model, log_path=log, extra_args=extra_args, api_key=api_key
            )
        except RuntimeError as exc:
            message = str(exc).strip().splitlines()[-1]
            raise CLIError(f"the built-in model server did not start: {message}") from exc
    servers.append(server)
    return Endpoint(server.model, server.base_url, api_key or "EMPTY")
