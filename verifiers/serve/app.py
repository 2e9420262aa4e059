"""The OpenAI-compatible HTTP layer over the batching engine.

Endpoints: ``GET /v1/models``, ``POST /v1/chat/completions``, ``POST /v1/completions`` (both with
``stream``), ``GET /health``, and for trainers ``GET /v1/weights`` / ``POST /v1/weights/load``
(swap in a safetensors checkpoint, bumping the policy version every reply reports) and
``POST /v1/weights/broadcast/{init,update}`` (the same over a process group; see
``verifiers.weights.receiver``).
Extensions vLLM also has: ``return_token_ids`` (completion and prompt token ids), ``top_k``,
``ignore_eos``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from verifiers.asgi.deadlines import READ_TIMEOUT_S
from verifiers.asgi.json_api import APIError, APIKeyCheck, _error, _json, read_body
from verifiers.serve.lanes import PromptLanes
from verifiers.serve.limits import ClientBudget, client_of, unless_gone
from verifiers.serve.prompts import Kind
from verifiers.serve.protocol import Reply
from verifiers.serve.service import ModelService, Started, parse_tool_calls
from verifiers.serve.streaming import stream_chat, stream_text
from verifiers.weights.files import WeightsFileError
from verifiers.weights.protocol import LoadWeightsRequest


def build_app(
    service: ModelService,
    api_key: str | None = None,
    budget: ClientBudget | None = None,
    read_timeout: float = READ_TIMEOUT_S,
) -> Starlette:
    """The app; without ``api_key`` every client is anonymous and held to ``budget``; a request
    body must arrive within ``read_timeout`` seconds (408 otherwise)."""
    ids = itertools.count(1)
    budget = ClientBudget(max_tokens=0) if api_key else (budget or ClientBudget())
    lanes = PromptLanes(service.prompts)

    async def health(_: Request) -> Response:
        return _json(
            {"status": "ok", "model": service.name, "policy_version": service.policy_version}
        )

    async def models(_: Request) -> Response:
        return _json(
            {
                "object": "list",
                "data": [
                    {
                        "id": service.name,
                        "object": "model",
                        "created": service.created,
                        "owned_by": "verifiers",
                        "max_model_len": service.engine.max_model_len,
                        "policy_version": service.policy_version,
                    }
                ],
            }
        )

    async def admit(request: Request, kind: Kind) -> tuple[Reply, list[int], Started]:
        """Read the body, prepare it off the loop, check the context and the client's budget,
        start the sequences. The budget holds the request from its first byte until its last
        sequence ends, however it ends; a client that hangs up meanwhile is let go."""
        held = budget.hold(client_of(request))
        try:
            body = await held.read_body(request)
            client = None if api_key else held.client  # trusted clients take no turns
            prepared = lanes.prepare(body, kind, client)
            reply, prompt_ids, params, n = await unless_gone(request, prepared)
            held.charge(n * (len(prompt_ids) + params.max_tokens))  # each choice its own copy
        except BaseException:
            held.release()
            raise
        # a kept prefill is faster: each anonymous client keeps its own (no timing oracle)
        return reply, prompt_ids, service.start(prompt_ids, params, n, held.release, client)

    async def finished(request: Request, started: Started) -> None:
        """Every sequence done; if the client hangs up first (or one fails), all of them stop."""
        try:
            await unless_gone(request, asyncio.gather(*(service.finish(s, q) for s, q in started)))
        except BaseException:
            service.cancel(started)
            raise

    async def answer(
        request: Request,
        kind: Kind,
        prefix: str,
        body_of: Callable[[Reply, str, list[int], Started], dict[str, Any]],
    ) -> Response:
        try:
            reply, prompt_ids, started = await admit(request, kind)
            rid = f"{prefix}-{next(ids)}-{uuid.uuid4().hex[:8]}"
            if reply.stream:
                stream = stream_chat if kind == "chat" else stream_text
                return StreamingResponse(
                    stream(service, reply, rid, prompt_ids, started),
                    media_type="text/event-stream",
                )
            await finished(request, started)
        except APIError as exc:
            return _error(exc)
        except ClientDisconnect:  # no one is there to read an answer
            return Response(status_code=499)
        return _json(body_of(reply, rid, prompt_ids, started))

    def chat_body(
        reply: Reply, rid: str, prompt_ids: list[int], started: Started
    ) -> dict[str, Any]:
        choices = []
        for index, (seq, _) in enumerate(started):
            text, reason = service.output_text(seq)
            content, tool_calls = parse_tool_calls(text) if reply.tool_calls else (text, [])
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if tool_calls:
                message["tool_calls"], reason = tool_calls, "tool_calls"
            choice: dict[str, Any] = {
                "index": index,
                "message": message,
                "finish_reason": reason,
                "logprobs": None,
            }
            if reply.logprobs:
                choice["logprobs"] = {
                    "content": [
                        service.token_entry(t, lp, seq.out_top[i] if seq.out_top else None)
                        for i, (t, lp) in enumerate(zip(seq.out_ids, seq.out_logprobs, strict=True))
                    ]
                }
            if reply.return_token_ids:
                choice["token_ids"] = list(seq.out_ids)
            choices.append(choice)
        return service.envelope(
            rid, "chat.completion", choices, prompt_ids, started, reply.return_token_ids
        )

    def text_body(
        reply: Reply, rid: str, prompt_ids: list[int], started: Started
    ) -> dict[str, Any]:
        choices = []
        for index, (seq, _) in enumerate(started):
            text, reason = service.output_text(seq)
            choice: dict[str, Any] = {
                "index": index,
                "text": text,
                "finish_reason": reason,
                "logprobs": None,
            }
            if reply.logprobs:
                choice["logprobs"] = {
                    "tokens": [service.tokenizer.decode([t]) for t in seq.out_ids],
                    "token_logprobs": list(seq.out_logprobs),
                    "top_logprobs": [
                        {service.tokenizer.decode([t]): lp for t, lp in top} for top in seq.out_top
                    ]
                    or None,
                }
            if reply.return_token_ids:
                choice["token_ids"] = list(seq.out_ids)
                choice["prompt_token_ids"] = prompt_ids
            choices.append(choice)
        return service.envelope(
            rid, "text_completion", choices, prompt_ids, started, reply.return_token_ids
        )

    async def chat(request: Request) -> Response:
        return await answer(request, "chat", "chatcmpl", chat_body)

    async def completions(request: Request) -> Response:
        return await answer(request, "text", "cmpl", text_body)

    async def weights(_: Request) -> Response:
        return _json(
            {
                "policy_version": service.policy_version,
                "path": service.weights_path,
                "inference_ranks": 1,  # processes that join a weight group (vLLM: one per GPU)
            }
        )

    async def load_weights(request: Request) -> Response:
        try:
            service.access.check(request.headers)
            req = LoadWeightsRequest.model_validate(orjson.loads(await read_body(request)))
            directory = service.access.check_path(req.path)
        except APIError as exc:
            return _error(exc)
        except (ValidationError, orjson.JSONDecodeError) as exc:
            return _error(APIError(400, f"invalid request: {exc}"))
        dtype = next(service.engine.model.parameters()).dtype
        try:  # full weights, or a LoRA adapter merged into the served base
            state = await asyncio.to_thread(service.weight_files.read, directory, dtype)
        except PermissionError as exc:  # a file in it leads outside the trusted directories
            return _error(APIError(403, str(exc), kind="permission_error", param="path"))
        except (WeightsFileError, ValueError, OSError) as exc:  # missing, not weights, not these
            return _error(
                APIError(400, f"cannot load weights from {req.path}: {exc}", param="path")
            )
        await asyncio.to_thread(service.engine.swap_weights, state)
        service.advance(req.policy_version, req.path)
        return _json({"policy_version": service.policy_version, "path": req.path})

    def guarded(route: Any) -> Any:  # weight changes need the trainer's secret
        async def check_then(request: Request) -> Response:
            try:
                service.access.check(request.headers)
            except APIError as exc:
                return _error(exc)
            return await route(request)

        return check_then

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        lanes.close()

    app = Starlette(
        lifespan=lifespan,
        routes=[
            Route("/health", health),
            Route("/v1/models", models),
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/weights", weights),
            Route("/v1/weights/load", load_weights, methods=["POST"]),
            Route("/v1/weights/broadcast/init", guarded(service.receiver.init), methods=["POST"]),
            Route(
                "/v1/weights/broadcast/update", guarded(service.receiver.update), methods=["POST"]
            ),
        ]
    )
    app.state.read_timeout = read_timeout
    if api_key:
        app.add_middleware(APIKeyCheck, api_key=api_key)
    return app

