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

from verifiers.http_api import APIError

T = TypeVar("T")
_PROMPTS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="vf-serve-prompt")


async def off_loop(work: Callable[..., T], *args: Any) -> T:
    """``work(*args)`` in the prompt pool (rendering and tokenizing), awaited."""
    return await asyncio.get_running_loop().run_in_executor(_PROMPTS, work, *args)


@dataclass
class ClientBudget:
    """Tokens and requests in flight per client address; ``max_tokens`` 0 means no budget."""

    max_tokens: int = 32_768
    max_requests: int = 64
    _tokens: dict[str, int] = field(default_factory=dict)
    _requests: dict[str, int] = field(default_factory=dict)

    def acquire(self, client: str, tokens: int) -> Callable[[], None]:
        """Count a request against ``client`` (or refuse it with a 429); returns the release,
        which runs once whenever it is called."""
        if not self.max_tokens:
            return lambda: None
        held, running = self._tokens.get(client, 0), self._requests.get(client, 0)
        if tokens > self.max_tokens:
            raise APIError(
                429,
                f"this request needs {tokens} tokens (prompt + n x max_tokens) and a client may "
                f"hold {self.max_tokens} at a time here: lower n or max_tokens, or run the "
                "server with --api-key for trusted clients",
                "rate_limit_error",
                "max_tokens",
            )
        if held + tokens > self.max_tokens or running >= self.max_requests:
            raise APIError(
                429,
                f"this client already has {running} requests holding {held} tokens in flight "
                f"(limits: {self.max_requests} requests, {self.max_tokens} tokens): wait for "
                "them to finish, then retry",
                "rate_limit_error",
            )
        self._tokens[client], self._requests[client] = held + tokens, running + 1
        done = [False]

        def release() -> None:
            if done[0]:
                return
            done[0] = True
            self._tokens[client] -= tokens
            self._requests[client] -= 1
            if not self._requests[client]:
                del self._tokens[client], self._requests[client]

        return release
