"""What one anonymous client may ask of vf-serve at a time, and prompt work off the event loop.

Without ``--api-key`` anyone who reaches the port is a client. One of them asking for 16 x 8k
tokens (or sending a thousand requests) would hold the batch for minutes while everyone else
waits, so each client (by address) has a budget of tokens in flight (its requests' prompts plus
``n x max_tokens``) and of concurrent requests; past it, a 429 says what to do. A server with
``--api-key`` serves trusted clients only and keeps no per-client budget.

Rendering and tokenizing a prompt (up to the 32 MiB body limit) takes seconds for the largest:
it runs in a small thread pool, never on the event loop, so one large prompt stalls no one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from verifiers.asgi.json_api import APIError

T = TypeVar("T")
_PROMPTS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="vf-serve-prompt")


async def off_loop(work: Callable[..., T], *args: Any) -> T:
    """``work(*args)`` in the prompt pool (rendering and tokenizing), awaited."""
    return await asyncio.get_running_loop().run_in_executor(_PROMPTS, work, *args)


@dataclass
class ClientBudget:
    """Requests and tokens in flight per client address; ``max_tokens`` 0 means no budget."""

    max_tokens: int = 32_768
    max_requests: int = 64
    _tokens: dict[str, int] = field(default_factory=dict)
    _requests: dict[str, int] = field(default_factory=dict)

    def hold(self, client: str) -> Hold:
        """Count a request against ``client`` from its first byte (before its prompt is
        tokenized), or refuse it with a 429; ``charge`` its tokens once they are known."""
        if self.max_tokens:
            running = self._requests.get(client, 0)
            if running >= self.max_requests:
                raise APIError(
                    429,
                    f"this client already has {running} requests in flight (limit "
                    f"{self.max_requests}): wait for them to finish, then retry",
                    "rate_limit_error",
                )
            self._requests[client] = running + 1
        return Hold(self, client)


@dataclass
class Hold:
    """One request's share of its client's budget, released once, whenever that is."""

    budget: ClientBudget
    client: str
    tokens: int = 0
    released: bool = False

    def charge(self, tokens: int) -> None:
        budget, client = self.budget, self.client
        if not budget.max_tokens:
            return
        held = budget._tokens.get(client, 0)
        if tokens > budget.max_tokens:
            raise APIError(
                429,
                f"this request needs {tokens} tokens (prompt + n x max_tokens) and a client may "
                f"hold {budget.max_tokens} at a time here: lower n or max_tokens, or run the "
                "server with --api-key for trusted clients",
                "rate_limit_error",
                "max_tokens",
            )
        if held + tokens > budget.max_tokens:
            raise APIError(
                429,
                f"this client already holds {held} tokens in flight (limit {budget.max_tokens}): "
                "wait for its requests to finish, then retry",
                "rate_limit_error",
            )
        budget._tokens[client] = held + tokens
        self.tokens = tokens

    def release(self) -> None:
        budget, client = self.budget, self.client
        if self.released or not budget.max_tokens:
            return
        self.released = True
        budget._tokens[client] = budget._tokens.get(client, 0) - self.tokens
        budget._requests[client] -= 1
        if not budget._requests[client]:
            budget._requests.pop(client)
            budget._tokens.pop(client, None)
