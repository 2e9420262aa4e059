"""The self-hostable Environments Hub: ``prime hub serve``."""

from hub_server.app import Hub, HubError, create_app

__all__ = ["Hub", "HubError", "create_app"]
