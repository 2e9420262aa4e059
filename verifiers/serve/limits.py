"""What one anonymous client may ask of vf-serve at a time.

Without ``--api-key`` anyone who reaches the port is a client. One of them asking for 16 x 8k
tokens (or sending a thousand requests, or gigabytes of bodies) would hold the batch or the
memory while everyone else waits, so each client has a budget of what it has in flight: tokens
(``n x (prompt + max_tokens)`` for each request: each of its ``n`` choices is a sequence of
its own, its own copy of the prompt included), requests, and request-body bytes; past it, a 429
says what to do. A server with ``--api-key`` serves trusted clients only and keeps no budget.

A client is the address its connection comes from, never a header (vf-serve runs uvicorn without
proxy headers: ``X-Forwarded-For`` is anyone's to write). Addresses one party can pick at will
count as one client (``verifiers.asgi.peers``): every address of this machine (all of 127.0.0.0/8
and ``::1``, and the host's own addresses, which any local process may bind: one client per local
user), and each IPv6 /64 (one host's, by SLAAC and privacy addresses). A request nobody waits for any more (its client hung up)
is cancelled and stops counting.

Where a body is parsed, rendered and tokenized (off the loop; the largest in a child process) is
``verifiers.serve.lanes``'s to say.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from starlette.requests import ClientDisconnect, Request

from verifiers.asgi.json_api import MAX_BODY, APIError
from verifiers.asgi.peers import peer_of

T = TypeVar("T")


def client_of(request: Request) -> str:
    """Whose budget ``request`` counts against (``verifiers.asgi.peers``)."""
    peer = request.client or ("", None)
    server = request.scope.get("server")
    return peer_of(peer[0], peer[1], tuple(server) if server else None)


async def unless_gone(request: Request, work: Awaitable[T]) -> T:
    """``work``'s result; if the client hangs up first, ``work`` is cancelled and
    ``ClientDisconnect`` raised. Call it once the body is read (it then listens for the end)."""
    task = asyncio.create_task(_awaited(work))  # a task, so cancelling it leaves nothing unread
    gone = asyncio.create_task(_hung_up(request))
    try:
        done, _ = await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        task.cancel()  # nothing once it is done; else its client (or the server) has gone
    if task not in done:
        raise ClientDisconnect()
    return task.result()


async def _awaited(work: Awaitable[T]) -> T:
    return await work


async def _hung_up(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


@dataclass
class InFlight:
    """One client's requests, tokens and request-body bytes in flight."""

    requests: int = 0
    tokens: int = 0
    body_bytes: int = 0


@dataclass
class ClientBudget:
    """What each client may have in flight; ``max_tokens`` 0 means no budget at all."""

    max_tokens: int = 32_768
    max_requests: int = 64
    max_bytes: int = 2 * MAX_BODY
    clients: dict[str, InFlight] = field(default_factory=dict)

    def hold(self, client: str) -> Hold:
        """Count a request against ``client`` from its first byte (before its body is read),
        or refuse it with a 429; its bytes and tokens are charged as they become known."""
        if self.max_tokens:
            held = self.clients.setdefault(client, InFlight())
            if held.requests >= self.max_requests:
                raise _busy(
                    f"this client already has {held.requests} requests in flight (limit "
                    f"{self.max_requests})"
                )
            held.requests += 1
        return Hold(self, client)


def _busy(what: str) -> APIError:
    return APIError(429, f"{what}: wait for its requests to finish, then retry", "rate_limit_error")


@dataclass
class Hold:
    """One request's share of its client's budget, released once, whenever that is."""

    budget: ClientBudget
    client: str
    tokens: int = 0
    body_bytes: int = 0
    released: bool = False

    @property
    def in_flight(self) -> InFlight | None:
        return self.budget.clients.get(self.client) if self.budget.max_tokens else None

    async def read_body(self, request: Request) -> bytes:
        """The body, each chunk charged as it arrives: a 413 past 32 MiB for this request, a
        429 past the client's bytes in flight. ``ClientDisconnect`` if the client hangs up."""
        length = request.headers.get("content-length", "")
        if length.isascii() and length.isdigit() and int(length) > MAX_BODY:
            raise APIError(413, f"request bodies are limited to {MAX_BODY} bytes")
        chunks = []
        timeout = getattr(request.app.state, "read_timeout", None)
        try:  # a stalled body holds the client's budget only this long
            async with asyncio.timeout(timeout):
                async for chunk in request.stream():
                    if self.body_bytes + len(chunk) > MAX_BODY:
                        raise APIError(413, f"request bodies are limited to {MAX_BODY} bytes")
                    self.charge_bytes(len(chunk))
                    chunks.append(chunk)
        except TimeoutError:
            raise APIError(408, f"the request body did not arrive within {timeout:g} s") from None
        return b"".join(chunks)

    def charge_bytes(self, size: int) -> None:
        held = self.in_flight
        if held is not None:
            if held.body_bytes + size > self.budget.max_bytes:
                raise _busy(
                    f"this client already has {held.body_bytes} bytes of requests in flight (limit "
                    f"{self.budget.max_bytes})"
                )
            held.body_bytes += size
        self.body_bytes += size

    def charge(self, tokens: int) -> None:
        held, limit = self.in_flight, self.budget.max_tokens
        if held is None:
            return
        if tokens > limit:
            raise APIError(
                429,
                f"this request needs {tokens} tokens (n x (prompt + max_tokens)) and a client may "
                f"hold {limit} at a time here: lower n or max_tokens, or run the server with "
                "--api-key for trusted clients",
                "rate_limit_error",
                "max_tokens",
            )
        if held.tokens + tokens > limit:
            raise _busy(f"this client already holds {held.tokens} tokens in flight (limit {limit})")
        held.tokens += tokens
        self.tokens = tokens

    def release(self) -> None:
        held = self.in_flight
        if self.released or held is None:
            return
        self.released = True
        held.requests -= 1
        held.tokens -= self.tokens
        held.body_bytes -= self.body_bytes
        if not held.requests:
            self.budget.clients.pop(self.client)
