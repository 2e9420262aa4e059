"""The v1 rollout errors: which part of a rollout failed (the provider, the harness, a tool
server, the sandbox, the task's own code), so a trace's ``errors`` say where to look and a
retry policy can name the kinds it retries. Each is also the SDK's ``VFError``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from verifiers.errors import VFError


class RolloutError(VFError):
    """A failure that ends one rollout (recorded on its trace, never raised through a run)."""


class ProviderError(RolloutError):
    """The model endpoint failed (HTTP error, refused request, malformed response)."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class OverlongPromptError(ProviderError):
    """The prompt does not fit the model's context window."""


class HarnessError(RolloutError):
    """The harness program (the agent loop) failed."""


class ToolsetError(RolloutError):
    """A tool server failed to start or to answer."""


class EnvError(RolloutError):
    """The environment's own episode code failed."""


class SandboxError(RolloutError):
    """The runtime (sandbox) failed to start, run or read."""


class TaskError(RolloutError):
    """The task's code (setup, finalize, a reward or metric) failed."""


class InterceptionError(RolloutError):
    """The interception server between a harness and the model failed."""


class TunnelError(InterceptionError):
    """A tunnel to the interception server failed."""


@asynccontextmanager
async def boundary(error_cls: type[RolloutError], what: str) -> AsyncIterator[None]:
    """Attribute any error escaping the block to ``error_cls`` (named ``what``); a
    ``RolloutError`` raised inside keeps its own, more specific kind."""
    try:
        yield
    except Exception as e:
        error = attributed(error_cls, what, e)
        if error is e:
            raise
        raise error from e


def attributed(error_cls: type[RolloutError], what: str, error: Exception) -> Exception:
    """``error`` as ``boundary`` attributes it: a ``RolloutError`` as it is, any other as
    ``error_cls`` naming ``what`` (for a hot path that catches without entering ``boundary``)."""
    if isinstance(error, RolloutError):
        return error
    if isinstance(error, TimeoutError):
        return error_cls(f"{what} timed out")
    return error_cls(f"{what}: {type(error).__name__}: {error}")
