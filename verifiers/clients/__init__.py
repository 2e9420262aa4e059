"""The one layer through which rollouts talk to a model.

Two interfaces over one transport. ``ModelClient`` (``chat``/``complete`` returning the server's
JSON) is what the engine uses for environments of the dict era (verifiers 0.1.x before 0.1.11);
``vf.Client`` (``get_response`` returning a ``vf.Response``) is the client layer of 0.1.11+, with
one class per API (chat completions, completions, Responses, Anthropic Messages) and
``make_client`` building the right one from a ``ClientConfig``, a base URL or a client object.

``OpenAICompatibleClient`` speaks the OpenAI HTTP API. The package exports; its modules implement:
``protocol`` (``ModelClient``), ``resolve`` (``model_client``, ``make_client``), ``http_client``,
``sdk_client``, ``retry``, ``client``/``config`` and one module per API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from verifiers.clients.http_client import OpenAICompatibleClient
from verifiers.clients.protocol import ClosableModelClient as ClosableModelClient
from verifiers.clients.protocol import ModelClient
from verifiers.clients.resolve import (
    CLIENT_CLASSES,
    make_client,
    model_client,
    resolve_client,
)
from verifiers.clients.resolve import client_class as client_class
from verifiers.clients.retry import NO_RETRY, RetryPolicy
from verifiers.clients.sdk_client import SDKClient

if TYPE_CHECKING:
    from verifiers.clients.client import Client
    from verifiers.clients.config import ClientConfig


# The client classes load on first use (the anthropic and openai SDKs are not paid for by a run
# that never names them): PEP 562, so it lives here.
def __getattr__(name: str) -> Any:
    for module, cls in CLIENT_CLASSES.values():
        if cls == name:
            import importlib

            return getattr(importlib.import_module(module), name)
    if name in ("Client", "ClientConfig"):
        import importlib

        module = "verifiers.clients.client" if name == "Client" else "verifiers.clients.config"
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module 'verifiers.clients' has no attribute {name!r}")


__all__ = [
    "NO_RETRY",
    "Client",
    "ClientConfig",
    "ModelClient",
    "OpenAICompatibleClient",
    "RetryPolicy",
    "SDKClient",
    "make_client",
    "model_client",
    "resolve_client",
]
