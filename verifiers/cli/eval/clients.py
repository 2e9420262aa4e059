"""The model client of a vf-eval run: the one this process calls (``--api``), and the
serializable form environment workers build their own from."""

from __future__ import annotations

from typing import Any

from verifiers.cli.endpoints import Endpoint


def make_eval_client(api: str, endpoint: Endpoint, headers: dict[str, str], key_var: str) -> Any:
    """The client for ``--api``: the lean chat-completions client, or the ``vf.Client`` of
    the completions, Responses or Anthropic Messages API (the key read from ``key_var``)."""
    from verifiers.clients import OpenAICompatibleClient, make_client
    from verifiers.clients.config import API_TO_CLIENT_TYPE, ClientConfig

    if api == "chat":
        return OpenAICompatibleClient(endpoint.url, endpoint.api_key, headers=headers)
    config = ClientConfig(
        client_type=API_TO_CLIENT_TYPE[api],
        api_base_url=endpoint.url,
        api_key_var=key_var,
        extra_headers=headers,
        max_retries=3,
        timeout=600.0,
    )
    return make_client(config)


def eval_client_config(api: str, endpoint: Endpoint, headers: dict[str, str], key_var: str) -> Any:
    """The serializable form of the run's client, for environment workers (they read the key
    from ``key_var`` in their own environment)."""
    from verifiers.clients.config import API_TO_CLIENT_TYPE, ClientConfig
    from verifiers.workers.runner import NO_KEY_VAR

    return ClientConfig(
        client_type=API_TO_CLIENT_TYPE[api],
        api_base_url=endpoint.url,
        api_key_var=key_var if endpoint.api_key and endpoint.api_key != "EMPTY" else NO_KEY_VAR,
        extra_headers=headers,
        max_retries=3,
        timeout=600.0,
    )
