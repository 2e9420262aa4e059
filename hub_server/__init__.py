"""The self-hostable Environments Hub: ``prime hub serve``."""

from hub_server.app import create_app
from hub_server.errors import HubError
from hub_server.services.hub import Hub
from hub_server.settings import HubSettings

__all__ = ["Hub", "HubError", "HubSettings", "create_app"]
