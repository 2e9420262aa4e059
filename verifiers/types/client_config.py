"""Serializable client settings: what crosses a process boundary instead of a live client.

A ``ClientConfig`` names an endpoint (base URL, the *environment variable* holding the key, extra
headers, timeouts, retries) and which API to speak; ``verifiers.clients.make_client`` builds the
client from it wherever it is needed (an environment worker, another machine). Keys are never
part of a config, only the name of the variable that holds them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

ClientType = Literal[
    "openai_completions",
    "openai_chat_completions",
    "openai_chat_completions_token",
    "openai_responses",
    "renderer",
    "anthropic_messages",
    "nemorl_chat_completions",
]
EndpointApi = Literal[
    "chat",
    "chat_completions",
    "completions",
    "responses",
    "messages",
    "anthropic",
    "openai_chat_completions",
    "openai_completions",
    "openai_responses",
    "anthropic_messages",
]
API_TO_CLIENT_TYPE: dict[str, ClientType] = {
    "chat": "openai_chat_completions",
    "chat_completions": "openai_chat_completions",
    "openai_chat_completions": "openai_chat_completions",
    "completions": "openai_completions",
    "openai_completions": "openai_completions",
    "responses": "openai_responses",
    "openai_responses": "openai_responses",
    "messages": "anthropic_messages",
    "anthropic": "anthropic_messages",
    "anthropic_messages": "anthropic_messages",
}
DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
DEFAULT_KEY_VAR = "VF_API_KEY"


def _headers(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("extra_headers must be a dict")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key.strip():
            raise ValueError("extra_headers keys must be non-empty strings")
        if not isinstance(item, str):
            raise ValueError("extra_headers values must be strings")
        out[key] = item
    return out


Headers = Annotated[dict[str, str], BeforeValidator(_headers)]


class EndpointConfig(BaseModel):
    """One entry of an endpoint registry (``endpoints.toml``): a model at a URL."""

    model_config = ConfigDict(extra="forbid")

    model: str
    base_url: str
    api_key_var: str
    api_client_type: ClientType | None = None
    extra_headers: Headers = Field(default_factory=dict)


Endpoints = dict[str, list[EndpointConfig]]


class EndpointClientConfig(BaseModel):
    """One endpoint of a ``ClientConfig`` that spreads requests over several."""

    client_idx: int = 0
    api_key_var: str = DEFAULT_KEY_VAR
    api_base_url: str = DEFAULT_BASE_URL
    timeout: float = 3600.0
    connect_timeout: float = 5.0
    max_connections: int = 28000
    max_keepalive_connections: int = 28000
    max_retries: int = 10
    extra_headers: Headers = Field(default_factory=dict)


class ClientConfig(BaseModel):
    """How to reach a model: endpoint, API kind, credentials by variable name, limits."""

    client_idx: int = 0
    client_type: ClientType = "openai_chat_completions"
    renderer_config: dict | None = None
    renderer_model_name: str | None = None
    renderer_pool_size: int | None = None
    api_key_var: str = DEFAULT_KEY_VAR
    api_base_url: str = DEFAULT_BASE_URL
    endpoint_configs: list[EndpointClientConfig] = Field(default_factory=list)
    timeout: float = 3600.0
    connect_timeout: float = 5.0
    max_connections: int = 28000
    max_keepalive_connections: int = 28000
    max_retries: int = 10
    extra_headers: Headers = Field(default_factory=dict)
    extra_headers_from_state: dict[str, str] = Field(
        default_factory=dict,
        description="Header name -> state key: each request carries that state field's value.",
    )

    @field_validator("endpoint_configs", mode="before")
    @classmethod
    def _flat_endpoints(cls, value: object) -> object:
        if not isinstance(value, list):
            return value
        out = []
        for endpoint in value:
            nested = (
                endpoint.get("endpoint_configs")
                if isinstance(endpoint, dict)
                else getattr(endpoint, "endpoint_configs", None)
            )
            if nested:
                raise ValueError(
                    "ClientConfig.endpoint_configs entries cannot include endpoint_configs"
                )
            if isinstance(endpoint, ClientConfig):
                endpoint = endpoint.model_dump(exclude={"endpoint_configs"}, exclude_unset=True)
            out.append(endpoint)
        return out


def _merge(parent: ClientConfig, endpoint: EndpointClientConfig) -> ClientConfig:
    data = parent.model_dump(exclude={"endpoint_configs"})
    data.update(endpoint.model_dump(include=endpoint.model_fields_set))
    return ClientConfig.model_validate(data)


def resolve_client_config(config: ClientConfig) -> ClientConfig:
    """The concrete config of one endpoint (``client_idx`` picks among ``endpoint_configs``)."""
    if not config.endpoint_configs:
        return ClientConfig.model_validate(config.model_dump())
    return _merge(config, config.endpoint_configs[config.client_idx % len(config.endpoint_configs)])


def resolve_client_configs(config: ClientConfig) -> list[ClientConfig]:
    """Every endpoint of ``config`` as its own concrete config."""
    if config.endpoint_configs:
        return [_merge(config, endpoint) for endpoint in config.endpoint_configs]
    return [resolve_client_config(config)]
