"""A lean client for OpenAI-compatible endpoints: JSON in, JSON out, typed errors.

The rollout engine spends most of its client-side CPU here, so the path is short: one orjson
encode, one pooled HTTP/1.1 request, one orjson decode, and no per-reply model validation.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from typing import Any

import orjson

from verifiers import errors
from verifiers.clients.retry import RetryPolicy, call_with_retries, parse_retry_after
from verifiers.types import ModelResponse

logger = logging.getLogger("verifiers.clients.http")

CONTEXT_LENGTH_MARKERS = (
    "maximum context length",
    "context length",
    "prompt is too long",
    "too many tokens",
    "exceed the configured limit",
    "exceeds the configured limit",
    "exceeded model",
)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "model_dump"):
        return obj.model_dump(exclude_none=True)
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    raise TypeError(f"cannot serialize {type(obj).__name__} in a model request")


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, default=_json_default, option=orjson.OPT_SERIALIZE_NUMPY)


class OpenAICompatibleClient:
    """Talks to ``{base_url}/chat/completions`` and ``{base_url}/completions``.

    Built on aiohttp: on two cores it spends about 0.2 ms of CPU per request where httpx and the
    openai SDK spend 1-3 ms, and the client side is what bounds rollout throughput
    (``benchmarks/eval_throughput.py``).

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``.
        api_key: sent as a bearer token when given.
        headers: extra headers sent with every request.
        timeout: seconds to wait for a whole reply.
        retry: the policy for transient failures.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        timeout: float = 600.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.base_url = str(base_url).rstrip("/")
        self.api_key = api_key
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        hdrs = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            hdrs["Authorization"] = f"Bearer {api_key}"
        hdrs.update(headers or {})
        self.headers = hdrs
        self._session: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _get_session(self) -> Any:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            _abandon(self._session, self._loop)
            self._session = aiohttp.ClientSession(
                headers=self.headers,
                timeout=aiohttp.ClientTimeout(total=self.timeout, connect=min(self.timeout, 10.0)),
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
            )
            self._loop = loop
            # a client nobody closed (made inside asyncio.run, kept to the end): its sockets are
            # released when it goes or the interpreter exits, without aiohttp's warning
            weakref.finalize(self, _abandon, self._session, None)
        return self._session

    async def aclose(self) -> None:
        """Close pooled connections; the next call opens new ones."""
        if self._session is not None and self._loop is asyncio.get_running_loop():
            await self._session.close()
        else:
            _abandon(self._session, self._loop)
        self._session = self._loop = None

    async def chat(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        sampling_args: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> ModelResponse:
        body = build_body(model, sampling_args)
        body["messages"] = messages
        if tools:
            body["tools"] = tools
        return await self.post("/chat/completions", body, expect="message", headers=headers)

    async def complete(
        self,
        *,
        model: str,
        prompt: str,
        sampling_args: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> ModelResponse:
        body = build_body(model, sampling_args)
        body["prompt"] = prompt
        return await self.post("/completions", body, expect="text", headers=headers)

    async def post(
        self,
        path: str,
        body: dict[str, Any],
        expect: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> ModelResponse:
        """POST JSON with retries; ``expect`` names the field each choice must have (None: any
        JSON object, as the Responses and Anthropic Messages APIs answer)."""
        payload = dumps(body)
        return await call_with_retries(
            lambda: self._post_once(path, payload, expect, headers), self.retry
        )

    async def _post_once(
        self, path: str, payload: bytes, expect: str | None, headers: dict[str, str] | None
    ) -> ModelResponse:
        import aiohttp

        url = self.base_url + path
        started = time.perf_counter()
        try:
            async with self._get_session().post(url, data=payload, headers=headers) as resp:
                content = await resp.read()
                status, resp_headers = resp.status, resp.headers
        except TimeoutError as exc:
            raise errors.ModelTimeoutError(f"no reply from {url} within {self.timeout:g}s") from exc
        except aiohttp.ClientConnectorError as exc:
            raise errors.ModelConnectionError(
                f"could not connect to {url}: {exc.os_error or exc} (is the server running?)"
            ) from exc
        except aiohttp.ClientError as exc:
            raise errors.ModelConnectionError(
                f"connection to {url} failed mid-request: {type(exc).__name__}: {exc}"
            ) from exc
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "POST %s: HTTP %d, %d bytes in %.0f ms",
                url,
                status,
                len(content),
                (time.perf_counter() - started) * 1000,
            )
        if status >= 400:
            raise http_error(
                status, content, resp_headers.get("Retry-After"), url, keyed=bool(self.api_key)
            )
        try:
            data = orjson.loads(content)
        except orjson.JSONDecodeError as exc:
            raise errors.MalformedResponseError(
                f"{url} returned invalid JSON: {content[:200]!r}", status_code=status
            ) from exc
        if not isinstance(data, dict):
            raise errors.MalformedResponseError(
                f"{url} returned {type(data).__name__}, not a JSON object"
            )
        response = ModelResponse(data)
        if expect is not None:
            validate_choices(response, expect)
        return response


def _abandon(session: Any, loop: asyncio.AbstractEventLoop | None) -> None:
    """Drop a session whose event loop is gone (e.g. after ``asyncio.run`` returned).

    Its sockets belong to the dead loop and cannot be closed through it; closing the connector
    synchronously releases them and keeps aiohttp from warning about an unclosed session.
    """
    if session is None or session.closed:
        return
    if loop is not None and not loop.is_closed():
        loop.call_soon_threadsafe(lambda: loop.create_task(session.close()))
        return
    connector = session.connector
    try:
        if connector is not None:
            connector._close()
    except (RuntimeError, OSError) as exc:  # its loop is gone: the sockets go with the process
        logger.debug("closing an orphaned aiohttp connector: %s", exc)
    session._connector = None


async def post_or_create(
    client: Any,
    path: str,
    resource: str,
    body: dict[str, Any],
    extra_body: dict[str, Any],
    headers: dict[str, str] | None,
) -> Any:
    """One request of an API this SDK speaks beside chat (Responses, Anthropic Messages), sent
    through whichever client the user gave: this SDK's HTTP client posts ``body`` with
    ``extra_body`` merged at ``path``; a vendor SDK client calls ``client.<resource>.create``."""
    if isinstance(client, OpenAICompatibleClient):
        return await client.post(path, {**body, **extra_body}, headers=headers)
    create = getattr(client, resource).create
    return await create(**body, extra_body=extra_body or None, extra_headers=headers)


def build_body(model: str, sampling_args: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model}
    for key, value in (sampling_args or {}).items():
        if value is None:
            continue
        if key == "extra_body" and isinstance(value, dict):
            body.update({k: v for k, v in value.items() if v is not None})
        elif key in ("extra_headers", "extra_query", "timeout"):
            continue  # client-side options of the openai SDK, not request fields
        else:
            body[key] = value
    return body


def validate_choices(response: ModelResponse, field: str) -> None:
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise errors.MalformedResponseError(f"reply has no choices: {str(dict(response))[:200]}")
    if field not in choices[0]:
        raise errors.MalformedResponseError(
            f"reply choice has no '{field}': {str(choices[0])[:200]}"
        )


def http_error(
    status: int, content: bytes, retry_after_header: str | None, url: str, keyed: bool = True
) -> errors.ModelError:
    """Map an HTTP error status to the typed error the retry policy understands; ``keyed``:
    whether the request carried an API key (a refusal of one sent without says so)."""
    try:
        detail: Any = orjson.loads(content)
        if isinstance(detail, dict) and isinstance(detail.get("error"), dict):
            detail = detail["error"].get("message", detail)
    except orjson.JSONDecodeError:
        detail = content[:300].decode("utf-8", "replace")
    message = f"HTTP {status} from {url}: {detail}"
    retry_after = parse_retry_after(retry_after_header)
    if status == 429:
        return errors.RateLimitError(message, status_code=status, retry_after=retry_after)
    if status == 408:
        return errors.ModelTimeoutError(message, status_code=status)
    if status >= 500:
        return errors.ServerError(message, status_code=status, retry_after=retry_after)
    if status in (401, 403):
        hint = (
            "check the API key"
            if keyed
            else "it was sent with no API key: set the key's variable (-k), or, from a "
            "vf-env-server started with --no-auth, which sends none, use one with a secret"
        )
        return errors.AuthenticationError(f"{message} ({hint})", status_code=status)
    if any(marker in str(detail).lower() for marker in CONTEXT_LENGTH_MARKERS):
        return errors.PromptTooLongError(message, status_code=status)
    return errors.BadRequestError(message, status_code=status)
