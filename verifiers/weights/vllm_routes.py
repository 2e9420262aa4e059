"""vLLM as the trainer's inference server: the weight-update API of vf-serve, on vLLM.

Loaded into vLLM's own OpenAI server with ``--middleware verifiers.weights.vllm_routes.weight_routes``
(with ``--worker-extension-cls verifiers.weights.vllm_worker.WeightUpdateExtension``), it answers

- ``GET /v1/weights``: policy version, last weights path, number of inference ranks;
- ``POST /v1/weights/load``: safetensors from a directory (the filesystem transport);
- ``POST /v1/weights/broadcast/init`` and ``/update``: the process-group transport;

by calling the worker extension through ``EngineClient.collective_rpc``, and adds the serving
``policy_version`` to every non-streaming completion reply, as vf-serve does, so the trainer can
bound staleness. After each update the prefix cache is reset (its KV came from the old weights):
vLLM refuses a reset while running requests hold cached blocks, so the reset is retried, then
forced (preempting those requests), and completion requests that arrive meanwhile wait until it
has succeeded; none is served from KV of the old weights.
One API-server process (vLLM's default) keeps the version; ``--api-server-count`` > 1 would not.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from verifiers.asgi.json_api import APIError, _error, _json
from verifiers.weights.access import VLLM_API_KEY_ENV, WeightAccess
from verifiers.weights.protocol import (
    BroadcastInitRequest,
    BroadcastUpdateRequest,
    LoadWeightsRequest,
)

logger = logging.getLogger(__name__)

_COMPLETIONS = ("/v1/chat/completions", "/v1/completions")


class _WeightState:
    def __init__(self) -> None:
        self.policy_version = 0
        self.weights_path: str | None = None
        self.join: asyncio.Task | None = None
        self.busy = asyncio.Lock()
        self.serving = asyncio.Event()  # cleared from new weights until the cache reset is done
        self.serving.set()


RESET_RETRY_S = 5.0  # plain resets this long (running requests finish), then a forced one
RESET_INTERVAL_S = 0.05


STATE = _WeightState()
ACCESS = WeightAccess.from_environment()  # the secret and trusted dirs vf-rl put in vLLM's environment


async def weight_routes(request: Request, call_next: Any) -> Response:
    """vLLM ``--middleware`` entry point (an ASGI HTTP middleware function)."""
    path = request.url.path
    if path.startswith("/v1/weights"):
        handler = _ROUTES.get((request.method, path))
        if handler is None:
            return _error(APIError(404, f"no route {request.method} {path}"))
        try:
            _check_api_key(request)  # vLLM's --api-key covers these routes as well
            if request.method != "GET":  # changes to the weights need the trainer's secret
                ACCESS.check(request.headers)
            return await handler(request, request.app.state.engine_client)
        except APIError as exc:
            return _error(exc)
    if path in _COMPLETIONS:
        await STATE.serving.wait()  # never served from a prefix cache of the old weights
    version = STATE.policy_version  # the oldest weights this request can have been served by
    response = await call_next(request)
    if path in _COMPLETIONS and response.headers.get("content-type", "").startswith(
        "application/json"
    ):
        return await _with_version(response, version)
    return response


def _check_api_key(request: Request) -> None:
    """vLLM's ``--api-key`` (or ``VLLM_API_KEY``), enforced here too: this middleware answers the
    weight routes itself, possibly before vLLM's own authentication runs."""
    args = getattr(request.app.state, "args", None)
    keys = [k for k in (getattr(args, "api_key", None), os.environ.get(VLLM_API_KEY_ENV)) if k]
    keys = [k for key in keys for k in ([key] if isinstance(key, str) else list(key))]
    if not keys:
        return
    given = request.headers.get("authorization", "")
    if not any(hmac.compare_digest(given.encode(), f"Bearer {k}".encode()) for k in keys):
        raise APIError(401, "invalid API key", kind="authentication_error")


async def _with_version(response: Any, version: int) -> Response:
    body = b"".join([chunk async for chunk in response.body_iterator])
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict) and "choices" in data:
        data["policy_version"] = version
        body = orjson.dumps(data)
    headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
    return Response(body, status_code=response.status_code, headers=headers)


async def _body(request: Request, model: type[BaseModel]) -> Any:
    try:
        return model.model_validate(orjson.loads(await request.body() or b"{}"))
    except (ValidationError, orjson.JSONDecodeError) as exc:
        raise APIError(400, f"invalid request: {exc}") from exc


def _inference_ranks(engine: Any) -> int:
    return int(engine.vllm_config.parallel_config.world_size)


async def _info(request: Request, engine: Any) -> Response:
    return _json(
        {
            "policy_version": STATE.policy_version,
            "path": STATE.weights_path,
            "inference_ranks": _inference_ranks(engine),
        }
    )


async def _load(request: Request, engine: Any) -> Response:
    req = await _body(request, LoadWeightsRequest)
    directory = str(ACCESS.check_path(req.path))
    async with STATE.busy:
        try:
            trusted = [str(root) for root in ACCESS.trusted]  # every file read must lie there
            await engine.collective_rpc(
                "verifiers_load_weights_from_path", args=(directory, trusted)
            )
        except Exception as exc:
            raise APIError(
                400, f"loading weights from {req.path} failed: {exc}", param="path"
            ) from exc
        await _reset_prefix_cache(engine)
        _advance(req.policy_version, req.path)
    return _json({"policy_version": STATE.policy_version, "path": req.path})


async def _init(request: Request, engine: Any) -> Response:
    req = await _body(request, BroadcastInitRequest)
    expected = 1 + _inference_ranks(engine)
    if req.world_size != expected or req.rank != 1:
        raise APIError(
            400,
            f"this server has {expected - 1} inference ranks: use world_size {expected}, rank 1",
        )
    if STATE.busy.locked():
        raise APIError(409, "a weight update is in progress")
    if STATE.join is not None:  # a newer init wins: a pending or previous group is dropped
        if not STATE.join.done():
            STATE.join.cancel()
        STATE.join = None
        await _close_group(engine)
    try:  # before joining: weights of another model are refused here, not mid-update
        await engine.collective_rpc("verifiers_check_manifest", args=(req.tensors,))
    except Exception as exc:
        raise APIError(400, str(exc), param="tensors") from exc
    args = (req.host, req.store_file, 1, req.world_size, req.backend, req.timeout_s, req.tensors)
    # completes when the trainer has joined too; awaited by the first update
    STATE.join = asyncio.ensure_future(
        engine.collective_rpc("verifiers_join_weight_group", args=args)
    )
    return _json({"status": "joining", "tensors": len(req.tensors)}, 202)


async def _update(request: Request, engine: Any) -> Response:
    req = await _body(request, BroadcastUpdateRequest)
    if STATE.join is None:
        raise APIError(409, "no weight group: call /v1/weights/broadcast/init first")
    if STATE.busy.locked():
        raise APIError(409, "a weight update is already in progress")
    async with STATE.busy:
        try:
            await STATE.join
        except Exception as exc:
            raise APIError(409, f"joining the weight group failed: {exc}") from exc
        try:
            await engine.collective_rpc("verifiers_receive_weights")
        except Exception as exc:
            STATE.join = None  # a broken group cannot be resynchronised; the trainer re-inits
            await _close_group(engine)
            raise APIError(500, f"receiving weights failed: {exc}", kind="server_error") from exc
        await _reset_prefix_cache(engine)
        _advance(req.policy_version, "broadcast")
    return _json({"policy_version": STATE.policy_version})


async def _reset_prefix_cache(engine: Any) -> None:
    """Reset until vLLM says it did, holding new completion requests back meanwhile.

    ``EngineClient.reset_prefix_cache`` returns False while running requests hold cached blocks
    (older vLLM returns None: done). After ``RESET_RETRY_S`` of refusals the reset is forced with
    ``reset_running_requests=True``, which preempts those requests (they recompute their KV)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RESET_RETRY_S
    STATE.serving.clear()
    try:
        while True:
            done = await engine.reset_prefix_cache()
            if done is None or done:
                return
            if loop.time() >= deadline:
                break
            await asyncio.sleep(RESET_INTERVAL_S)
        try:
            done = await engine.reset_prefix_cache(reset_running_requests=True)
        except TypeError:  # a vLLM without forced resets
            done = False
        if done is False:
            raise APIError(
                503,
                "the new weights are loaded but vLLM would not reset its prefix cache; cached KV "
                "of the old weights could be reused",
                kind="server_error",
            )
    finally:
        STATE.serving.set()


async def _close_group(engine: Any) -> None:
    try:
        await engine.collective_rpc("verifiers_close_weight_group")
    except Exception as exc:  # best effort: the workers may be gone, and the next init replaces it
        logger.warning("closing the weight group failed (%s: %s)", type(exc).__name__, exc)


def _advance(version: int | None, path: str) -> None:
    STATE.policy_version = version if version is not None else STATE.policy_version + 1
    STATE.weights_path = path


_ROUTES = {
    ("GET", "/v1/weights"): _info,
    ("POST", "/v1/weights/load"): _load,
    ("POST", "/v1/weights/broadcast/init"): _init,
    ("POST", "/v1/weights/broadcast/update"): _update,
}
