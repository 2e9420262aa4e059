"""A scripted model server for tests: real sockets, real JSON, injected faults.

It speaks OpenAI chat completions (``/v1/chat/completions``), text completions
(``/v1/completions``), the Responses API (``/v1/responses``) and Anthropic's Messages API
(``/v1/messages``): one script, four wire formats, so an environment can be run against each API.

Tests (yours too) start it on a free loopback port and script what it answers::

    with ModelServer(handler=lambda req: "hello") as server:
        server.enqueue(Reply(status=429, headers={"Retry-After": "0"}))  # first call: rate limited
        env.evaluate(server.base_url, "test-model")

Replies are taken from the queue first, then from the handler (``request body -> Reply | str``,
sync or async). Every request body is kept in ``server.requests``, and every body answered
with 200 in ``server.replies`` (a test compares what a client recorded, token usage included,
with what was sent).

Over 400 lines, not split: the four wire formats share one script, one fault injector and one
server; a module per format would divide what a test scripts once.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import inspect
import itertools
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

# A timeout test's two numbers, far apart so a loaded machine cannot blur them: a client timeout
# a prompt reply never reaches (even on 2 busy cores), and a stall that always passes it (cut
# short when the server stops).
STALL_TIMEOUT_S = 1.5
STALLED_S = 60.0


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


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(
            p.get("text", "")
            for p in content
            if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")
        )
    return content or "" if isinstance(content, str | type(None)) else str(content)


def conversation(request: dict[str, Any]) -> list[dict[str, Any]]:
    """A request's conversation in chat-completions shape, whichever API sent it (Responses
    input items and Anthropic turns are mapped back to messages)."""
    if isinstance(request.get("input"), list | str):  # the Responses API
        items = request["input"]
        if isinstance(items, str):
            return [{"role": "user", "content": items}]
        out: list[dict[str, Any]] = []
        for item in items:
            kind = item.get("type", "message")
            if kind == "message":
                out.append({"role": item.get("role"), "content": _text_of(item.get("content"))})
            elif kind == "function_call":
                call = {
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments")},
                }
                if out and out[-1]["role"] == "assistant":
                    out[-1].setdefault("tool_calls", []).append(call)
                else:
                    out.append({"role": "assistant", "content": None, "tool_calls": [call]})
            elif kind == "function_call_output":
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": item.get("call_id"),
                        "content": _text_of(item.get("output")),
                    }
                )
        return out
    messages = request.get("messages") or []
    if "anthropic-version" in request.get("_headers", {}) or request.get("_api") == "messages":
        out = [{"role": "system", "content": request["system"]}] if request.get("system") else []
        for turn in messages:
            content = turn.get("content")
            if not isinstance(content, list):
                out.append({"role": turn.get("role"), "content": content})
                continue
            results = [b for b in content if b.get("type") == "tool_result"]
            for block in results:
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": block.get("tool_use_id"),
                        "content": _text_of(block.get("content")),
                    }
                )
            uses = [b for b in content if b.get("type") == "tool_use"]
            text = _text_of(content)
            if uses or (turn.get("role") != "user" or not results):
                message: dict[str, Any] = {"role": turn.get("role"), "content": text or None}
                if uses:
                    message["tool_calls"] = [
                        {
                            "id": b.get("id"),
                            "type": "function",
                            "function": {
                                "name": b.get("name"),
                                "arguments": orjson.dumps(b.get("input") or {}).decode(),
                            },
                        }
                        for b in uses
                    ]
                out.append(message)
        return out
    return messages


def last_user_text(request: dict[str, Any]) -> str:
    if "prompt" in request:
        return str(request["prompt"])
    for message in reversed(conversation(request)):
        if message.get("role") == "user":
            return _text_of(message.get("content"))
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


def _responses_body(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A reply as the Responses API sends it (output items; ``incomplete`` for ``length``)."""
    output: list[dict[str, Any]] = []
    if reply.reasoning_content:
        output.append(
            {
                "type": "reasoning",
                "id": f"rs_{next(_ids)}",
                "summary": [{"type": "summary_text", "text": reply.reasoning_content}],
            }
        )
    if reply.content or not reply.tool_calls:
        output.append(
            {
                "type": "message",
                "id": f"msg_{next(_ids)}",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": reply.content or "", "annotations": []}
                ],
            }
        )
    for call in reply.tool_calls or []:
        function = call.get("function") or {}
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{next(_ids)}",
                "call_id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments"),
                "status": "completed",
            }
        )
    length = reply.finish_reason == "length"
    prompt_tokens = len(tokenize(_prompt_text({"messages": conversation(request)})))
    completion_tokens = len(tokenize(reply.content or ""))
    return {
        "id": f"resp_{next(_ids)}",
        "object": "response",
        "created_at": int(time.time()),
        "model": request.get("model", "test-model"),
        "status": "incomplete" if length else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if length else None,
        "output": output,
        "usage": {
            "input_tokens": prompt_tokens,
            "output_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _messages_body(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A reply as Anthropic's Messages API sends it (content blocks, ``stop_reason``)."""
    content: list[dict[str, Any]] = []
    if reply.reasoning_content:
        content.append(
            {"type": "thinking", "thinking": reply.reasoning_content, "signature": "sig"}
        )
    if reply.content or not reply.tool_calls:
        content.append({"type": "text", "text": reply.content or ""})
    for call in reply.tool_calls or []:
        function = call.get("function") or {}
        args = function.get("arguments")
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id"),
                "name": function.get("name"),
                "input": orjson.loads(args) if isinstance(args, str) and args else {},
            }
        )
    stop = (
        "tool_use"
        if reply.tool_calls
        else "max_tokens"
        if reply.finish_reason == "length"
        else "end_turn"
    )
    return {
        "id": f"msg_{next(_ids)}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "test-model"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": len(tokenize(_prompt_text({"messages": conversation(request)}))),
            "output_tokens": len(tokenize(reply.content or "")),
        },
    }


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
        # port 0: a port bound here and held until the server listens on it, so no other
        # process (another test worker's server, an outgoing connection) can take it meanwhile
        self._socket: socket.socket | None = None if port else _bound_socket(host, 0)
        self.port = self._socket.getsockname()[1] if self._socket else port
        self.model_name = model_name
        self.queue: collections.deque[Reply | str] = collections.deque()
        self.requests: list[dict[str, Any]] = []
        self.replies: list[dict[str, Any]] = []
        self.app = self._build_app()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._stop_event: asyncio.Event | None = None  # made in the server's own loop
        self._loop: asyncio.AbstractEventLoop | None = None

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

        async def responses(request: Request) -> Response:
            return await self._complete(request, chat=True, api="responses")

        async def messages(request: Request) -> Response:
            return await self._complete(request, chat=True, api="messages")

        return Starlette(
            routes=[
                Route("/v1/models", models),
                Route("/v1/chat/completions", chat, methods=["POST"]),
                Route("/v1/completions", completions, methods=["POST"]),
                Route("/v1/responses", responses, methods=["POST"]),
                Route("/v1/messages", messages, methods=["POST"]),
            ]
        )

    def _authorized(self, request: Any) -> bool:
        return self.api_key is None or (
            request.headers.get("authorization") == f"Bearer {self.api_key}"
            or request.headers.get("x-api-key") == self.api_key
        )

    async def _complete(self, request: Any, chat: bool, api: str = "chat"):
        from starlette.responses import Response

        if not self._authorized(request):
            return _error(401, "invalid API key", "authentication_error")
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return _error(400, "request body is not valid JSON", "invalid_request_error")
        needed = {"chat": "messages", "messages": "messages", "responses": "input"}.get(
            api, "prompt"
        )
        if not chat:
            needed = "prompt"
        if not isinstance(body, dict) or needed not in body:
            return _error(400, f"missing '{needed}'", "invalid_request_error")
        if api == "messages":
            if request.headers.get("anthropic-version") is None:
                return _error(400, "missing anthropic-version header", "invalid_request_error")
            if not isinstance(body.get("max_tokens"), int):
                return _error(400, "max_tokens: field required", "invalid_request_error")
            body["_api"] = "messages"
        self.requests.append(body)
        reply = self.queue.popleft() if self.queue else self.handler(body)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, str) or reply is None:
            reply = Reply(content=reply or "")
        if reply.delay:
            await self._stall(reply.delay)
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
        if api == "responses":
            sent = _responses_body(body, reply)
        elif api == "messages":
            sent = _messages_body(body, reply)
        else:
            sent = _completion_body(body, reply, chat)
        self.replies.append(sent)
        return _json(sent, headers=reply.headers)

    async def _stall(self, seconds: float) -> None:
        """Wait ``seconds``, or until the server stops: a reply stalled far past a client's
        timeout (so a test's margin is wide) never holds up the server's shutdown."""
        if self._stop_event is None:
            self._stop_event, self._loop = asyncio.Event(), asyncio.get_running_loop()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_event.wait(), seconds)

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
        if self._socket is not None and self._socket.fileno() == -1:  # closed by a stop()
            self._socket = _bound_socket(self.host, self.port)
        sockets = [self._socket] if self._socket is not None else None
        self._thread = threading.Thread(
            target=self._server.run, args=(sockets,), name="vf-test-model-server", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"test model server failed to start on {self.host}:{self.port}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop_event is not None:
            self._loop.call_soon_threadsafe(self._stop_event.set)
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()  # uvicorn closed it if it served; never started, it is ours
        self._server = self._thread = None
        self._stop_event = self._loop = None

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


def _bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (0: a free port), for uvicorn to listen on."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn's own bind does
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock
