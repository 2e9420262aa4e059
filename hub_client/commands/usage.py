"""What every ``prime`` command shares: its consoles, usage errors (exit 2), the hub it talks to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from hub_client.client import HubClient, hub_url
from hub_client.config import load_config
from hub_client.install import EnvSpec, InstallError
from verifiers.errors import UsageError  # the one usage error of every command (exit 2)

console = Console()
err = Console(stderr=True)


def client(login_required: bool = False) -> HubClient:
    config = load_config()
    if login_required and not config.token:
        raise UsageError(
            "you are not logged in: run `prime login --url http://HUB:8787` (or set PRIME_API_KEY)"
        )
    return HubClient(config.url, config.token)


def spec_of(text: str, what: str = "environment") -> EnvSpec:
    """``owner/name[@version]`` as typed, or a usage error (exit 2) saying the form."""
    try:
        return EnvSpec.parse(text)
    except InstallError as exc:
        raise UsageError(f"{exc} (the {what} to act on)") from None


def locked_hub(lock: Path) -> HubClient:
    """The hub the lock file's pins came from, with the login's token only if it is that hub."""
    config = load_config()
    try:
        recorded = json.loads(lock.read_text()).get("hub") if lock.exists() else None
    except (json.JSONDecodeError, AttributeError):
        recorded = None
    if not recorded or hub_url(str(recorded)) == hub_url(config.url):
        return HubClient(config.url, config.token)
    return HubClient(str(recorded), None)  # never send this hub's token to another one


def emit_json(model: Any) -> int:
    """``--output json``: the wire models, as the API returns them."""
    data = [m.model_dump() for m in model] if isinstance(model, list) else model.model_dump()
    print(json.dumps(data, indent=2))
    return 0
