"""Classic module path ``verifiers.utils.async_utils``."""

from verifiers.concurrency import NullAsyncContext, maybe_await, maybe_semaphore

__all__ = ["NullAsyncContext", "maybe_await", "maybe_semaphore"]
