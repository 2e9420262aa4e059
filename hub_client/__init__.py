"""The hub client: the ``prime`` command and a typed HTTP client for the Environments Hub."""

from hub_client.client import HubAPIError, HubClient

__all__ = ["HubAPIError", "HubClient"]
