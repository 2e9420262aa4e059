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
import hmac
import itertools
import json
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from verifiers.http_api import APIError, _error, _json, read_body
from verifiers.serve.engine import Engine, SamplingParams, Sequence
from verifiers.serve.limits import ClientBudget, off_loop
from verifiers.serve.protocol import ChatCompletionRequest, CompletionRequest
from verifiers.weights.access import WeightAccess
from verifiers.weights.protocol import LoadWeightsRequest
from verifiers.weights.receiver import BroadcastReceiver

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


class ModelService:
    """Prompt rendering, request fan-out (``n``), output assembly; one per served model."""

    def __init__(
        self,
        engine: Engine,
        name: str,
        aliases: tuple[str, ...] = (),
        access: WeightAccess | None = None,
    ) -> None:
        self.engine = engine
        self.access = access or WeightAccess.configure()
        self.tokenizer = engine.tokenizer
        # no token covers more text than the longest in the vocabulary: a prompt longer than
        # the context times that cannot fit, and is refused without tokenizing it
        self.longest_token = max((len(t) for t in self.tokenizer.get_vocab()), default=1)
        self.name = name
        self.names = {name, name.lower(), *aliases}
        self.policy_version = 0
        self.weights_path: str | None = None
        self.created = int(time.time())
        self.receiver = BroadcastReceiver(self)  # weights over a process group, from a trainer

    def advance(self, version: int | None, path: str) -> None:
        """New weights are in: the trainer's version for them, or one more than before."""
        self.policy_version = version if version is not None else self.policy_version + 1
        self.weights_path = path

    # --- prompts -------------------------------------------------------------------------------
    def check_model(self, model: str) -> None:
        if model not in self.names and model.lower() not in self.names:
            raise APIError(
                404,
                f"model {model!r} is not served here; this server serves {self.name!r}",
                "not_found_error",
                "model",
            )

    def chat_prompt_ids(self, request: ChatCompletionRequest) -> list[int]:
        messages = [_template_message(m) for m in request.messages]
        try:
            text = self.tokenizer.apply_chat_template(
                messages, tools=request.tools, add_generation_prompt=True, tokenize=False
            )
        except Exception as exc:  # a template that rejects these messages
            raise APIError(
                400, f"the chat template cannot render these messages: {exc}", param="messages"
            ) from exc
        self.check_fits(text, "messages")
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def check_fits(self, text: str, param: str) -> None:
        limit = self.engine.max_model_len * self.longest_token
        if len(text) > limit:
            raise APIError(
                400,
                f"the prompt has {len(text)} characters; this model's context of "
                f"{self.engine.max_model_len} tokens holds at most {limit}",
                param=param,
            )

    def text_prompt_ids(self, request: CompletionRequest) -> list[int]:
        if isinstance(request.prompt, list):
            ids = list(request.prompt)
            vocab = self.engine.vocab_size
            bad = next((t for t in ids if not 0 <= t < vocab), None)
            if not ids or bad is not None:
                problem = "is empty" if not ids else f"has token id {bad}, outside [0, {vocab})"
                raise APIError(400, f"the prompt {problem}", param="prompt")
            return ids
        self.check_fits(request.prompt, "prompt")
        ids = self.tokenizer(request.prompt)["input_ids"]
        if not ids:
            raise APIError(400, "the prompt is empty", param="prompt")
        return ids

    def params(self, request: Any, prompt_len: int, top_logprobs: int) -> SamplingParams:
        limit = self.engine.max_model_len
        if prompt_len >= limit:
            raise APIError(
                400,
                f"This model's maximum context length is {limit} tokens; the prompt has {prompt_len} tokens.",
                param="messages",
            )
        max_tokens = request.limit or (limit - prompt_len)
        if prompt_len + max_tokens > limit:
            raise APIError(
                400,
                f"This model's maximum context length is {limit} tokens; the prompt has {prompt_len} tokens "
                f"and max_tokens is {max_tokens}. Lower max_tokens or shorten the prompt.",
                param="max_tokens",
            )
        return SamplingParams(
            max_tokens=max_tokens,
            temperature=request.temperature,
            top_p=request.top_p,
            top_k=max(request.top_k, 0),
            stop=request.stop,
            seed=request.seed,
            top_logprobs=top_logprobs,
            ignore_eos=request.ignore_eos,
        )

    # --- running sequences -----------------------------------------------------------------------
    def start(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        n: int,
        on_finished: Callable[[], None] | None = None,
    ) -> list[tuple[Sequence, asyncio.Queue]]:
        """Submit ``n`` sequences; ``on_finished`` runs (on the loop) once all of them ended,
        however they ended (done, error, or cancelled by a client that went away)."""
        loop = asyncio.get_running_loop()
        started = []
        left = [n]

        def ended() -> None:
            left[0] -= 1
            if not left[0] and on_finished is not None:
                on_finished()

        for i in range(n):
            events: asyncio.Queue = asyncio.Queue()
            p = (
                params
                if params.seed is None or i == 0
                else SamplingParams(**{**params.__dict__, "seed": params.seed + i})
            )

            def emit(kind: str, payload: Any, events: asyncio.Queue = events) -> None:
                loop.call_soon_threadsafe(events.put_nowait, (kind, payload))
                if kind in ("done", "error"):
                    loop.call_soon_threadsafe(ended)

            started.append((self.engine.submit(Sequence(prompt_ids, p, emit)), events))
        return started

    async def finish(self, seq: Sequence, events: asyncio.Queue) -> None:
        while True:
            kind, payload = await events.get()
            if kind == "done":
                return
            if kind == "error":
                raise APIError(500, f"generation failed: {payload}", "server_error")

    def output_text(self, seq: Sequence) -> tuple[str, str]:
        """Decoded text (EOS and special tokens removed, cut at a stop string) and finish reason."""
        text = self.tokenizer.decode(seq.out_ids, skip_special_tokens=True)
        reason = seq.finish_reason or "stop"
        for stop in seq.params.stop:
            index = text.find(stop)
            if index >= 0:
                text, reason = text[:index], "stop"
        return text, "length" if reason == "length" else "stop"

    def token_entry(
        self, token: int, logprob: float, top: list[tuple[int, float]] | None
    ) -> dict[str, Any]:
        piece = self.tokenizer.decode([token])
        entry: dict[str, Any] = {"token": piece, "logprob": logprob, "bytes": list(piece.encode())}
        entry["top_logprobs"] = [
            {
                "token": self.tokenizer.decode([t]),
                "logprob": lp,
                "bytes": list(self.tokenizer.decode([t]).encode()),
            }
            for t, lp in (top or [])
        ]
        return entry

    def envelope(
        self,
        rid: str,
        kind: str,
        choices: list[dict[str, Any]],
        prompt_ids: list[int],
        started: list[tuple[Sequence, Any]],
        with_token_ids: bool,
    ) -> dict[str, Any]:
        """The response body around the choices (shared by chat and text completions)."""
        body: dict[str, Any] = {
            "id": rid,
            "object": kind,
            "created": int(time.time()),
            "model": self.name,
            "choices": choices,
            "usage": self.usage(prompt_ids, [s for s, _ in started]),
            "policy_version": self.policy_version,
        }
        if with_token_ids:
            body["prompt_token_ids"] = prompt_ids
        return body

    def usage(self, prompt_ids: list[int], seqs: list[Sequence]) -> dict[str, int]:
        completion = sum(len(s.out_ids) for s in seqs)
        return {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": completion,
            "total_tokens": len(prompt_ids) + completion,
        }


def _template_message(message: dict[str, Any]) -> dict[str, Any]:
    out = dict(message)
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    elif content is None:
        out["content"] = ""
    for call in out.get("tool_calls") or []:
        function = call.get("function") or {}
        if isinstance(function.get("arguments"), str):
            try:
                function["arguments"] = json.loads(function["arguments"])
            except json.JSONDecodeError:
                pass
    return out


def parse_tool_calls(text: str) -> tuple[str | None, list[dict[str, Any]]]:
    """Hermes-style ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks."""
    calls = []
    for block in _TOOL_CALL.findall(text):
        try:
            data = json.loads(block)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            arguments = data.get("arguments", {})
            calls.append(
                {
                    "id": f"call_{uuid.uuid4().hex[:24]}",
                    "type": "function",
                    "function": {
                        "name": data["name"],
                        "arguments": arguments
                        if isinstance(arguments, str)
                        else json.dumps(arguments),
                    },
                }
            )
    if not calls:
        return text, []
    rest = _TOOL_CALL.sub("", text).strip()
    return rest or None, calls


def build_app(
    service: ModelService, api_key: str | None = None, budget: ClientBudget | None = None
) -> Starlette:
    """The app; without ``api_key`` every client is anonymous and held to ``budget``."""
    ids = itertools.count(1)
    budget = ClientBudget(max_tokens=0) if api_key else (budget or ClientBudget())

    def admit(request: Request, prompt_ids: list[int], params: SamplingParams, n: int):
        client = request.client.host if request.client else "unknown"
        release = budget.acquire(client, len(prompt_ids) + n * params.max_tokens)
        return service.start(prompt_ids, params, n, on_finished=release)

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

    async def parse(request: Request, model: type) -> Any:
        try:
            body = orjson.loads(await read_body(request))
        except orjson.JSONDecodeError as exc:
            raise APIError(400, f"request body is not valid JSON: {exc}") from exc
        try:
            parsed = model.model_validate(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            param = ".".join(str(p) for p in first["loc"])
            raise APIError(400, f"invalid request: {param}: {first['msg']}", param=param) from exc
        service.check_model(parsed.model)
        return parsed

    async def chat(request: Request) -> Response:
        try:
            req: ChatCompletionRequest = await parse(request, ChatCompletionRequest)
            prompt_ids = await off_loop(service.chat_prompt_ids, req)
            top = req.top_logprobs or 0 if req.logprobs else 0
            params = service.params(req, len(prompt_ids), top)
            started = admit(request, prompt_ids, params, req.n)
        except APIError as exc:
            return _error(exc)
        rid = f"chatcmpl-{next(ids)}-{uuid.uuid4().hex[:8]}"
        if req.stream:
            return StreamingResponse(
                _stream_chat(service, req, rid, prompt_ids, started), media_type="text/event-stream"
            )
        try:
            await asyncio.gather(*(service.finish(s, q) for s, q in started))
        except APIError as exc:
            return _error(exc)
        choices = []
        for index, (seq, _) in enumerate(started):
            text, reason = service.output_text(seq)
            content, tool_calls = parse_tool_calls(text) if req.tools else (text, [])
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if tool_calls:
                message["tool_calls"], reason = tool_calls, "tool_calls"
            choice: dict[str, Any] = {
                "index": index,
                "message": message,
                "finish_reason": reason,
                "logprobs": None,
            }
            if req.logprobs:
                choice["logprobs"] = {
                    "content": [
                        service.token_entry(t, lp, seq.out_top[i] if seq.out_top else None)
                        for i, (t, lp) in enumerate(zip(seq.out_ids, seq.out_logprobs, strict=True))
                    ]
                }
            if req.return_token_ids:
                choice["token_ids"] = list(seq.out_ids)
            choices.append(choice)
        return _json(
            service.envelope(
                rid, "chat.completion", choices, prompt_ids, started, req.return_token_ids
            )
        )

    async def completions(request: Request) -> Response:
        try:
            req: CompletionRequest = await parse(request, CompletionRequest)
            prompt_ids = await off_loop(service.text_prompt_ids, req)
            params = service.params(req, len(prompt_ids), req.logprobs or 0)
            started = admit(request, prompt_ids, params, req.n)
        except APIError as exc:
            return _error(exc)
        rid = f"cmpl-{next(ids)}-{uuid.uuid4().hex[:8]}"
        if req.stream:
            return StreamingResponse(
                _stream_text(service, req, rid, started), media_type="text/event-stream"
            )
        try:
            await asyncio.gather(*(service.finish(s, q) for s, q in started))
        except APIError as exc:
            return _error(exc)
        choices = []
        for index, (seq, _) in enumerate(started):
            text, reason = service.output_text(seq)
            choice: dict[str, Any] = {
                "index": index,
                "text": text,
                "finish_reason": reason,
                "logprobs": None,
            }
            if req.logprobs is not None:
                choice["logprobs"] = {
                    "tokens": [service.tokenizer.decode([t]) for t in seq.out_ids],
                    "token_logprobs": list(seq.out_logprobs),
                    "top_logprobs": [
                        {service.tokenizer.decode([t]): lp for t, lp in top} for top in seq.out_top
                    ]
                    or None,
                }
            if req.return_token_ids:
                choice["token_ids"] = list(seq.out_ids)
                choice["prompt_token_ids"] = prompt_ids
            choices.append(choice)
        return _json(
            service.envelope(
                rid, "text_completion", choices, prompt_ids, started, req.return_token_ids
            )
        )

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
        try:
            state = await asyncio.to_thread(_read_weights, directory, dtype)
        except APIError as exc:
            return _error(exc)
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

    app = Starlette(
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
    if api_key:
        app.add_middleware(APIKeyCheck, api_key=api_key)
    return app


def _read_weights(path: Path, dtype: Any) -> dict[str, Any]:
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
    if not files or not all(f.exists() for f in files):
        raise APIError(400, f"no safetensors weights at {path}", param="path")
    state: dict[str, Any] = {}
    for file in files:
        state.update(load_file(str(file)))
    return {k: v.to(dtype) for k, v in state.items()}


def _sse(obj: Any) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


async def _events(service: ModelService, started: list[tuple[Sequence, asyncio.Queue]]):
    """(index, kind, payload) from all sequences as they come."""
    merged: asyncio.Queue = asyncio.Queue()

    async def pump(index: int, events: asyncio.Queue) -> None:
        while True:
            kind, payload = await events.get()
            await merged.put((index, kind, payload))
            if kind in ("done", "error"):
                return

    tasks = [asyncio.ensure_future(pump(i, q)) for i, (_, q) in enumerate(started)]
    remaining = len(started)
    try:
        while remaining:
            index, kind, payload = await merged.get()
            if kind in ("done", "error"):
                remaining -= 1
            yield index, kind, payload
    finally:
        for task in tasks:
            task.cancel()
        for seq, _ in started:
            seq.cancelled = True  # a client that went away stops costing compute


class _Detokenizer:
    """Incremental text for streaming; holds back text that could still become a stop string."""

    def __init__(self, service: ModelService, seq: Sequence) -> None:
        self.service, self.seq, self.sent, self.stopped = service, seq, 0, False

    def delta(self, final: bool) -> str:
        if self.stopped:
            return ""
        text = self.service.tokenizer.decode(self.seq.out_ids, skip_special_tokens=True)
        for stop in self.seq.params.stop:
            index = text.find(stop)
            if index >= 0:
                text, self.stopped = text[:index], True
        hold = (
            0 if final or self.stopped else max((len(s) for s in self.seq.params.stop), default=0)
        )
        if text.endswith("\ufffd") and not final:
            hold = max(hold, 1)  # an incomplete UTF-8 character
        end = max(self.sent, len(text) - hold)
        piece, self.sent = text[self.sent : end], end
        return piece


async def _stream_chat(service, req, rid, prompt_ids, started):
    created = int(time.time())
    base = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": service.name}
    detok = [_Detokenizer(service, s) for s, _ in started]
    for i in range(len(started)):
        yield _sse(
            {
                **base,
                "choices": [
                    {
                        "index": i,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ],
            }
        )
    async for index, kind, payload in _events(service, started):
        if kind == "error":
            yield _sse(
                {"error": {"message": f"generation failed: {payload}", "type": "server_error"}}
            )
            break
        final = kind == "done"
        piece = detok[index].delta(final)
        choice: dict[str, Any] = {
            "index": index,
            "delta": {"content": piece} if piece else {},
            "finish_reason": None,
        }
        if kind == "token" and req.logprobs:
            token, logprob, top = payload
            choice["logprobs"] = {"content": [service.token_entry(token, logprob, top)]}
        if req.return_token_ids and kind == "token":
            choice["token_ids"] = [payload[0]]
        if final:
            choice["finish_reason"] = service.output_text(started[index][0])[1]
        if piece or final or "logprobs" in choice or "token_ids" in choice:
            yield _sse({**base, "choices": [choice]})
    if (req.stream_options or {}).get("include_usage"):
        yield _sse(
            {**base, "choices": [], "usage": service.usage(prompt_ids, [s for s, _ in started])}
        )
    yield b"data: [DONE]\n\n"


async def _stream_text(service, req, rid, started):
    base = {
        "id": rid,
        "object": "text_completion",
        "created": int(time.time()),
        "model": service.name,
    }
    detok = [_Detokenizer(service, s) for s, _ in started]
    async for index, kind, _payload in _events(service, started):
        if kind == "error":
            yield _sse({"error": {"message": "generation failed", "type": "server_error"}})
            break
        final = kind == "done"
        piece = detok[index].delta(final)
        if piece or final:
            reason = service.output_text(started[index][0])[1] if final else None
            yield _sse(
                {**base, "choices": [{"index": index, "text": piece, "finish_reason": reason}]}
            )
    yield b"data: [DONE]\n\n"


class APIKeyCheck:
    """``--api-key``: every route but ``/health`` needs ``Authorization: Bearer KEY``."""

    def __init__(self, app: Any, api_key: str) -> None:
        self.app, self.expected = app, f"Bearer {api_key}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] != "/health":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                response = _error(APIError(401, "invalid API key", kind="authentication_error"))
                return await response(scope, receive, send)
        await self.app(scope, receive, send)
