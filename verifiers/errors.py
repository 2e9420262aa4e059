"""One exception hierarchy for the SDK.

Errors that happen inside a rollout never escape the run: they are converted with ``to_record`` and
stored on the rollout (``state["error"]``), so a results file says what failed, where and how often.
"""

from __future__ import annotations

from typing import Any


class VFError(Exception):
    """Base class of every error the SDK raises on purpose."""


class DatasetError(VFError, ValueError):
    """A dataset row cannot be turned into a rollout input (says which row and why)."""


class EnvironmentNotFoundError(VFError, ImportError):
    """``load_environment`` found no package for an id (says what it tried)."""


class ResumeError(VFError):
    """A run directory cannot be resumed with the requested settings."""


# --- errors recorded on rollouts -------------------------------------------------------------


class RolloutError(VFError):
    """Something went wrong inside one rollout. Recorded on the rollout, never fatal to the run."""

    retryable = False


class ModelError(RolloutError):
    """The model endpoint could not produce a usable reply."""

    def __init__(self, message: str, *, status_code: int | None = None, retries: int = 0):
        super().__init__(message)
        self.status_code = status_code
        self.retries = retries


class ModelTimeoutError(ModelError):
    retryable = True


class ModelConnectionError(ModelError):
    retryable = True


class RateLimitError(ModelError):
    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any):
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ServerError(ModelError):
    retryable = True

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: Any):
        super().__init__(message, **kw)
        self.retry_after = retry_after


class BadRequestError(ModelError):
    """The endpoint rejected the request (4xx other than 408/409/429): retrying cannot help."""


class AuthenticationError(BadRequestError):
    pass


class PromptTooLongError(BadRequestError):
    """The conversation no longer fits the model's context; the rollout ends, not an error."""


class MalformedResponseError(ModelError):
    """The endpoint answered 200 with a body that is not a valid completion."""

    retryable = True


class EmptyModelResponseError(ModelError):
    """The model returned neither content nor tool calls."""


class EnvironmentResponseError(RolloutError):
    """The environment's own code (env_response, setup_state, a stop condition) raised."""


class RewardFunctionError(RolloutError):
    """A reward function raised; the function scores 0 and the error is recorded."""


def to_record(exc: BaseException, *, phase: str) -> dict[str, Any]:
    """A JSON-ready description of an error, stored on the rollout and in results."""
    record: dict[str, Any] = {
        "type": type(exc).__name__,
        "message": str(exc) or repr(exc),
        "phase": phase,
    }
    if isinstance(exc, ModelError):
        record["status_code"] = exc.status_code
        record["retries"] = exc.retries
    cause = exc.__cause__
    if cause is not None and not isinstance(exc, ModelError):
        record["cause"] = f"{type(cause).__name__}: {cause}"
    return record
