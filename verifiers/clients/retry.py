"""Retry policy for transient endpoint failures: exponential backoff with jitter, Retry-After aware."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TypeVar

from verifiers.errors import ModelError

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failed model call is retried.

    Only errors marked ``retryable`` (timeouts, 429, 5xx, dropped connections, malformed bodies) are
    retried; a 400 never is. A server's Retry-After wins over the computed delay, capped by
    ``max_delay`` so one bad header cannot stall a run.

    The first retry comes after ``first_delay`` (at most ``initial_delay``): most transient
    faults are one-off blips, over at once, and waiting half a second on each held a rollout's
    slot ten times as long as the call itself (a chaos run's 3% of failed requests slept 170 s
    in all). The retries after it back off as ``initial_delay * multiplier**attempt`` (1 s, 2 s,
    ...), so three retries still wait about 3 s in all for a server that stays down.
    """

    max_retries: int = 3
    initial_delay: float = 0.5
    max_delay: float = 30.0
    multiplier: float = 2.0
    jitter: float = 0.25  # fraction of the delay added at random, to spread synchronized retries
    first_delay: float = 0.05

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_delay)
        base = min(self.initial_delay * self.multiplier**attempt, self.max_delay)
        if attempt == 0:
            base = min(base, self.first_delay)
        return base + random.uniform(0, base * self.jitter)


NO_RETRY = RetryPolicy(max_retries=0)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        import datetime as dt

        when = parsedate_to_datetime(value)
        return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())
    except (TypeError, ValueError, IndexError):
        return None


async def call_with_retries(fn: Callable[[], Awaitable[T]], policy: RetryPolicy) -> T:
    """Run ``fn`` until it succeeds, a non-retryable error occurs, or retries run out.

    The raised error carries ``retries`` (how many retries were spent) for the results file.
    """
    attempt = 0
    while True:
        try:
            return await fn()
        except ModelError as exc:
            if not exc.retryable or attempt >= policy.max_retries:
                exc.retries = attempt
                raise
            await asyncio.sleep(policy.delay(attempt, getattr(exc, "retry_after", None)))
            attempt += 1
