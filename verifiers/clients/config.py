"""The client settings (``ClientConfig`` and the endpoint models), kept importable where the
clients use them; they are defined with the data that crosses boundaries
(``verifiers.types.client_config``), below the clients."""

from verifiers.types.client_config import (
    API_TO_CLIENT_TYPE,
    DEFAULT_BASE_URL,
    DEFAULT_KEY_VAR,
    ClientConfig,
    ClientType,
    EndpointApi,
    EndpointClientConfig,
    EndpointConfig,
    Endpoints,
    Headers,
    resolve_client_config,
    resolve_client_configs,
)

__all__ = [
    "API_TO_CLIENT_TYPE",
    "DEFAULT_BASE_URL",
    "DEFAULT_KEY_VAR",
    "ClientConfig",
    "ClientType",
    "EndpointApi",
    "EndpointClientConfig",
    "EndpointConfig",
    "Endpoints",
    "Headers",
    "resolve_client_config",
    "resolve_client_configs",
]
