"""A scripted OpenAI-compatible HTTP server for tests: real sockets, real JSON, injected faults.

Tests (yours too) start it on a free loopback port and script what it answers::

    with ModelServer(handler=lambda req: "hello") as server:
        server.enqueue(Reply(status=429, headers={"Retry-After": "0"}))  # first call: rate limited
        env.evaluate(server.base_url, "test-model")

Replies are taken from the queue first, then from the handler (``request body -> Reply | str``,
sync or async). Every request body is kept in ``server.requests``.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import itertools
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass
class Reply:
    """What the server sends for one request.

    ``status`` != 200 sends an OpenAI-style error; ``drop_connection`` closes the socket mid-body;
    ``raw_body`` sends those bytes as-is (malformed JSON); ``delay`` waits first (timeouts).
    Token ids and logprobs are included when the request asks (``logprobs`` / ``return_token_ids``).
    """

    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    reasoning_content: str | None = None
    finish_reason: str | None = None
    status: int = 200
    error: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop_connection: bool = False
    raw_body: bytes | None = None

    @staticmethod
    def tool_call(
        name: str, arguments: dict[str, Any] | str, call_id: str | None = None
    ) -> dict[str, Any]:
        args = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
        return {
            "id": call_id or f"call_{next(_ids)}",
            "type": "function",
            "function": {"name": name, "arguments": args},
        }


Handler = Callable[[dict[str, Any]], Any]
_ids = itertools.count(1)


def tokenize(text: str) -> list[int]:
    """The server's stand-in tokenizer: one token per UTF-8 byte (deterministic, invertible)."""
    return list(text.encode("utf-8"))


def last_user_text(request: dict[str, Any]) -> str:
    if "prompt" in request:
        return str(request["prompt"])
    for message in reversed(request.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content or ""
    return ""


def echo(request: dict[str, Any]) -> str:
    """Default handler: answer with the last user message."""
    return last_user_text(request)


def _prompt_text(request: dict[str, Any]) -> str:
    if "prompt" in request:
        return str(request["prompt"])
    return "".join(
        f"<{m.get('role')}>{m.get('content') or ''}" for m in request.get("messages") or []
    )


def _completion_body(request: dict[str, Any], reply: Reply, chat: bool) -> dict[str, Any]:
    content = reply.content if reply.content is not None or reply.tool_calls else ""
    choice: dict[str, Any] = {
        "index": 0,
        "finish_reason": reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop"),
    }
    text = content or ""
    if chat:
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        if reply.reasoning_content:
            message["reasoning_content"] = reply.reasoning_content
        choice["message"] = message
    else:
        choice["text"] = text
    completion_ids = tokenize(text)
    prompt_ids = tokenize(_prompt_text(request))
    if request.get("logprobs"):
        if chat:
            choice["logprobs"] = {
                "content": [
                    {"token": f"token_id:{t}", "logprob": -0.5, "bytes": [t], "top_logprobs": []}
                    for t in completion_ids
                ]
            }
        else:
            choice["logprobs"] = {
                "tokens": [chr(t) for t in completion_ids],
                "token_logprobs": [-0.5] * len(completion_ids),
            }
    body: dict[str, Any] = {
        "id": f"{'chatcmpl' if chat else 'cmpl'}-{next(_ids)}",
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": request.get("model", "test-model"),
        "choices": [choice],
        "usage": {
            "prompt_tokens": len(prompt_ids),
            "completion_tokens": len(completion_ids),
            "total_tokens": len(prompt_ids) + len(completion_ids),
        },
    }
    if request.get("return_token_ids"):
        choice["token_ids"] = completion_ids
        body["prompt_token_ids"] = prompt_ids
    return body


class ModelServer:
    """The server and its script. Use as a context manager, or ``start()``/``stop()``."""

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str = "test-model",
        api_key: str | None = None,
    ) -> None:
        self.handler: Handler = handler or echo
        self.api_key = (
            api_key  # when set, requests without "Authorization: Bearer <api_key>" get 401
        )
        self.host = host
        self.port = port or _free_port(host)
        self.model_name = model_name
        self.queue: collections.deque[Reply | str] = collections.deque()
        self.requests: list[dict[str, Any]] = []
        self.app = self._build_app()
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def enqueue(self, *replies: Reply | str) -> None:
        self.queue.extend(replies)

    def set_handler(self, handler: Handler) -> None:
        self.handler = handler

    # --- the ASGI app ----------------------------------------------------------------------------
    def _build_app(self):
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route

        async def models(request: Request) -> Response:
            if not self._authorized(request):
                return _error(401, "invalid API key", "authentication_error")
            return _json(
                {
                    "object": "list",
                    "data": [{"id": self.model_name, "object": "model", "owned_by": "verifiers"}],
                }
            )

        async def chat(request: Request) -> Response:
            return await self._complete(request, chat=True)

        async def completions(request: Request) -> Response:
            return await self._complete(request, chat=False)

        return Starlette(
            routes=[
                Route("/v1/models", models),
                Route("/v1/chat/completions", chat, methods=["POST"]),
                Route("/v1/completions", completions, methods=["POST"]),
            ]
        )

    def _authorized(self, request: Any) -> bool:
        return (
            self.api_key is None or request.headers.get("authorization") == f"Bearer {self.api_key}"
        )

    async def _complete(self, request: Any, chat: bool):
        from starlette.responses import Response

        if not self._authorized(request):
            return _error(401, "invalid API key", "authentication_error")
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return _error(400, "request body is not valid JSON", "invalid_request_error")
        if not isinstance(body, dict) or ("messages" not in body if chat else "prompt" not in body):
            return _error(
                400, f"missing '{'messages' if chat else 'prompt'}'", "invalid_request_error"
            )
        self.requests.append(body)
        reply = self.queue.popleft() if self.queue else self.handler(body)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, str) or reply is None:
            reply = Reply(content=reply or "")
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.drop_connection:
            return _Dropped()
        if reply.raw_body is not None:
            return Response(
                reply.raw_body,
                status_code=reply.status,
                media_type="application/json",
                headers=reply.headers,
            )
        if reply.status != 200:
            return _error(
                reply.status,
                reply.error or f"injected HTTP {reply.status}",
                "server_error",
                reply.headers,
            )
        return _json(_completion_body(body, reply, chat), headers=reply.headers)

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> ModelServer:
        import uvicorn

        config = uvicorn.Config(
            self.app,
            host=self.host,
            port=self.port,
            log_level="critical",
            lifespan="off",
            timeout_keep_alive=30,
            backlog=4096,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, name="vf-test-model-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"test model server failed to start on {self.host}:{self.port}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _json(body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None):
    from starlette.responses import Response

    return Response(
        orjson.dumps(body), status_code=status, media_type="application/json", headers=headers
    )


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None):
    return _json({"error": {"message": message, "type": kind, "code": status}}, status, headers)


class _Dropped:
    """Starts a response promising 1000 bytes, sends 10, then fails: the server closes the socket."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"1000")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"id": "x"', "more_body": True})
        raise ConnectionAbortedError("injected dropped connection")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
