"""``ModelClient``: the interface the engine calls for environments of the dict era (verifiers
0.1.x before 0.1.11), ``chat``/``complete`` returning the server's JSON."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from verifiers.types import ModelResponse


@runtime_checkable
class ModelClient(Protocol):
    async def chat(
        self,
        *,
        model: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        sampling_args: dict[str, Any] | None = None,
    ) -> ModelResponse: ...

    async def complete(
        self, *, model: str, prompt: str, sampling_args: dict[str, Any] | None = None
    ) -> ModelResponse: ...


@runtime_checkable
class ClosableModelClient(ModelClient, Protocol):
    """A ``ModelClient`` with connections to release: every one ``model_client`` builds. A
    user's own ``ModelClient`` needs only ``chat`` and ``complete``."""

    async def aclose(self) -> None: ...
