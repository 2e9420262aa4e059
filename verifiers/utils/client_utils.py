"""Classic module path ``verifiers.utils.client_utils``."""

from verifiers.clients.config import resolve_client_config, resolve_client_configs

__all__ = ["resolve_client_config", "resolve_client_configs"]
