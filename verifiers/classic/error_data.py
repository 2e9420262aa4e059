"""Errors as verifiers 0.1.11+ serializes them: a cause chain and the ``ErrorData`` dict.

``ErrorChain`` walks ``__cause__`` links (``ModelError -> TimeoutError``); ``error_data`` is the
JSON form saved on a rollout output, and ``error_from_data`` rebuilds the most specific SDK error
class named in a saved chain, so retry decisions made on serialized rollouts see the right type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict, TypeGuard

from verifiers import errors

ERROR_DATA_KEYS = frozenset({"error", "message", "error_chain_repr", "error_chain_str"})


class ErrorData(TypedDict):
    """A rollout's error as verifiers 0.1.11+ serializes it (``verifiers.utils.error_utils``)."""

    error: str
    message: str
    error_chain_repr: str
    error_chain_str: str


def get_error_chain(
    error: BaseException | None, parent_type: type[BaseException] | None = None
) -> list[BaseException]:
    """``error`` and its causes; with ``parent_type``, cut at the first cause not of that type."""
    chain: list[BaseException] = []
    while error is not None and len(chain) < 64:
        if parent_type is not None and not isinstance(error, parent_type):
            break
        chain.append(error)
        error = error.__cause__
    return chain


def get_vf_error_chain(error: BaseException) -> list[errors.VFError]:
    return [e for e in get_error_chain(error, errors.VFError) if isinstance(e, errors.VFError)]


class ErrorChain:
    """An error with its causes; equal to another chain of the same types."""

    def __init__(
        self,
        error: BaseException,
        build_error_chain: Callable[[BaseException], list[BaseException]] = get_error_chain,
    ) -> None:
        self.root_error = error
        self.chain = build_error_chain(error)

    def _names(self) -> tuple[str, ...]:
        return tuple(type(e).__name__ for e in self.chain)

    def __hash__(self) -> int:
        return hash(self._names())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ErrorChain):
            return NotImplemented
        return self._names() == other._names()

    def __contains__(self, error_cls: type[BaseException]) -> bool:
        return any(isinstance(e, error_cls) for e in self.chain)

    def __str__(self) -> str:
        return " -> ".join(self._names())

    def __repr__(self) -> str:
        return " -> ".join(repr(e) for e in self.chain)


def error_data(error: BaseException) -> ErrorData:
    chain = ErrorChain(error)
    return ErrorData(
        error=type(error).__name__,
        message=str(error) or type(error).__name__,
        error_chain_repr=repr(chain),
        error_chain_str=str(chain),
    )


def is_error_data(value: object) -> TypeGuard[ErrorData]:
    return (
        isinstance(value, dict)
        and set(value) == ERROR_DATA_KEYS
        and all(isinstance(value[k], str) for k in ERROR_DATA_KEYS)
    )


def validate_error_data(value: object) -> ErrorData:
    if not is_error_data(value):
        raise TypeError(
            "ErrorData must contain string error, message, error_chain_repr, and error_chain_str fields."
        )
    return value


def vf_error_types() -> tuple[type[errors.VFError], ...]:
    """The SDK's error classes, most specific first (the order names are matched in)."""
    found: list[type[errors.VFError]] = []

    def walk(cls: type[errors.VFError]) -> None:
        for sub in cls.__subclasses__():
            walk(sub)
        if cls not in found:
            found.append(cls)

    walk(errors.VFError)
    return tuple(found)


def error_data_to_exception(
    error: ErrorData, error_types: tuple[type[Exception], ...]
) -> Exception | None:
    chain = error["error_chain_str"] or error["error"]
    names = {part.strip() for part in chain.split("->")}
    detail = error["error_chain_repr"] or error["error"]
    for error_type in error_types:
        if error_type.__name__ in names:
            return error_type(detail)
    return None


def error_from_data(error: ErrorData) -> errors.VFError:
    rebuilt = error_data_to_exception(error, vf_error_types())
    if isinstance(rebuilt, errors.VFError):
        return rebuilt
    return errors.VFError(error["error_chain_repr"] or error["error"])


def error_chain(error: Any) -> str:
    """``repr`` of an error and its causes, as classic logs show it (``A() -> B()``)."""
    chain: list[str] = []
    while error is not None and len(chain) < 10:
        chain.append(repr(error))
        error = getattr(error, "__cause__", None)
    return " -> ".join(chain) or "None"
