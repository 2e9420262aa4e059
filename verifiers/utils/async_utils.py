"""Classic module path ``verifiers.utils.async_utils``."""

from verifiers.concurrency import (
    NullAsyncContext,
    maybe_await,
    maybe_call_with_named_args,
    maybe_semaphore,
    with_sem,
)
from verifiers.envs.retries import maybe_retry

__all__ = [
    "NullAsyncContext",
    "maybe_await",
    "maybe_call_with_named_args",
    "maybe_retry",
    "maybe_semaphore",
    "with_sem",
]
