"""One exception hierarchy for the SDK.

    Error (= VFError)
    ├── DatasetError (── NothingSelectedError), EnvironmentNotFoundError, ResumeError,
    │   EnvWorkerError, UsageError (── CLIError, ScaffoldError)  (raised to the caller)
    └── RolloutError                                            (recorded on a rollout)
        ├── ModelError
        │   ├── ModelTimeoutError, ModelConnectionError, RateLimitError, ServerError
        │   ├── BadRequestError ── AuthenticationError, PromptTooLongError (= OverlongPromptError)
        │   └── InvalidModelResponseError ── MalformedResponseError, EmptyModelResponseError
        ├── ToolError ── ToolParseError, ToolCallError
        ├── InfraError ── SandboxError ── BrowserSandboxError; TunnelError
        ├── EnvironmentResponseError
        └── RewardFunctionError

Errors of the SDK's commands and services live beside the code that raises them and share the
base: ``UsageError`` (here: every command's usage error, exit 2); ``ConfinementError`` and
``InstallFailed`` (confined installs); ``APIError``, ``InferenceServerError``,
``ModelNotAvailableError`` (serving); ``RescoreError``; ``MissingTokensError``, ``PackingError``,
``TemplateError``, ``TrackerMissingError`` (training). ``tests/codebase/test_errors_hierarchy.py`` checks
that every exception class under ``verifiers/`` is a ``VFError``.

Errors that happen inside a rollout never escape the run: ``record_error`` stores the exception on
the rollout (``state["error"]``, the classic place) and ``to_record`` turns it into the JSON of the
results file, so a run says what failed, where and how often.
"""

from __future__ import annotations

from typing import Any


class VFError(Exception):
    """Base class of every error the SDK raises on purpose."""

    phase: str | None = None  # where in a rollout it was raised (``record_error`` sets it)


Error = VFError  # the classic name: ``except vf.Error``


class DatasetError(VFError, ValueError):
    """A dataset row cannot be turned into a rollout input (says which row and why)."""


class NothingSelectedError(DatasetError):
    """vf-data's filter kept none of the rollouts read (says how many there were and why)."""


class EnvironmentNotFoundError(VFError, ImportError):
    """``load_environment`` found no package for an id (says what it tried)."""


class ResumeError(VFError):
    """A run directory cannot be resumed with the requested settings."""


class EnvWorkerError(VFError, RuntimeError):
    """Environment workers could not be started or reached (says which and why)."""


class UsageError(VFError, ValueError):
    """A command line (or what it names) a command cannot use: said as one line, exit status 2.

    Every SDK command raises it; ``verifiers.cli.usage`` is the one place that turns it into the
    message and the exit status. ``usage`` is the command's usage line when the parser refused
    the arguments (said first, as argparse says it)."""

    def __init__(self, message: str, usage: str | None = None) -> None:
        super().__init__(message)
        self.usage = usage


# --- errors recorded on rollouts -------------------------------------------------------------


class RolloutError(VFError):
    """Something went wrong inside one rollout. Recorded on the rollout, never fatal to the run.

    ``state["error"]`` holds the exception; it also reads like its results record
    (``state["error"]["type"]``, ``["message"]``, ``["phase"]``), as the results file records it.
    """

    retryable = False

    def __getitem__(self, key: str) -> Any:
        return to_record(self)[key]

    def get(self, key: str, default: Any = None) -> Any:
        return to_record(self).get(key, default)


class ModelError(RolloutError):
    """The model endpoint could not produce a usable reply."""

    def __init__(self, message: str = "", *, status_code: int | None = None, retries: int = 0):
        super().__init__(message)
        self.status_code = status_code
        self.retries = retries


class ModelTimeoutError(ModelError):
    retryable = True


class ModelConnectionError(ModelError):
    retryable = True


class RateLimitError(ModelError):
    retryable = True

    def __init__(self, message: str = "", *, retry_after: float | None = None, **kw: Any):
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ServerError(ModelError):
    retryable = True

    def __init__(self, message: str = "", *, retry_after: float | None = None, **kw: Any):
        super().__init__(message, **kw)
        self.retry_after = retry_after


class BadRequestError(ModelError):
    """The endpoint rejected the request (4xx other than 408/409/429): retrying cannot help."""


class AuthenticationError(BadRequestError):
    pass


class PromptTooLongError(BadRequestError):
    """The conversation no longer fits the model's context; the rollout ends, not an error."""


OverlongPromptError = PromptTooLongError  # the classic name


class InvalidModelResponseError(ModelError):
    """The endpoint's reply cannot be used as a completion."""


class MalformedResponseError(InvalidModelResponseError):
    """The endpoint answered 200 with a body that is not a valid completion."""

    retryable = True


class EmptyModelResponseError(InvalidModelResponseError):
    """The model returned neither content nor tool calls."""

    response: Any = None  # the reply as a ``vf.Response``, when the client could build one


class ToolError(RolloutError):
    """A tool call failed in a way the environment chose to end the rollout for."""


class ToolParseError(ToolError):
    """The model's tool call could not be parsed (bad JSON, not an object)."""


class ToolCallError(ToolError):
    """A tool raised, or was called with arguments it rejects."""


class InfraError(RolloutError):
    """Infrastructure the rollout depends on failed (not the model, not the environment's logic)."""


class SandboxError(InfraError):
    """A sandbox could not be created, crashed, or did not answer."""


class BrowserSandboxError(SandboxError):
    """A browser sandbox failed (the classic name; this SDK ships no browser sandbox)."""


class TunnelError(InfraError):
    """A tunnel to a remote service died or became unreachable."""


class EnvironmentResponseError(RolloutError):
    """The environment's own code (env_response, setup_state, a stop condition) raised."""


class RewardFunctionError(RolloutError):
    """A reward function raised; the function scores 0 and the error is recorded."""


def record_error(state: Any, exc: BaseException, *, phase: str) -> None:
    """Store ``exc`` as the rollout's error (``state["error"]``); the rollout then stops.

    Exceptions that are not part of the hierarchy (environment code that raised) are wrapped in
    ``EnvironmentResponseError`` with the original as ``__cause__``, so ``state["error"]`` is
    always a ``vf.Error``.
    """
    if not isinstance(exc, VFError):
        wrapped = EnvironmentResponseError(f"{phase} raised {type(exc).__name__}: {exc}")
        wrapped.__cause__ = exc
        exc = wrapped
    if getattr(exc, "phase", None) is None:
        exc.phase = phase
    state["error"] = exc


def to_record(exc: BaseException | dict[str, Any], *, phase: str | None = None) -> dict[str, Any]:
    """A JSON-ready description of an error, as saved in results (a dict passes through)."""
    if isinstance(exc, dict):
        return exc
    record: dict[str, Any] = {
        "type": type(exc).__name__,
        "message": str(exc) or repr(exc),
        "phase": phase or getattr(exc, "phase", None) or "rollout",
    }
    if isinstance(exc, ModelError):
        record["status_code"] = exc.status_code
        record["retries"] = exc.retries
    cause = exc.__cause__
    if cause is not None and not isinstance(exc, ModelError):
        record["cause"] = f"{type(cause).__name__}: {cause}"
    return record
