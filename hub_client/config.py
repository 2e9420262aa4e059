"""Where the hub is and who we are: ``~/.config/prime/config.toml`` (0600), env overrides."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

DEFAULT_URL = "http://127.0.0.1:8787"


def config_path() -> Path:
    root = os.environ.get("PRIME_CONFIG_DIR") or os.path.join(
        os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"), "prime"
    )
    return Path(root) / "config.toml"


@dataclass
class HubConfig:
    url: str
    token: str | None


def load_config() -> HubConfig:
    data: dict = {}
    path = config_path()
    if path.exists():
        data = tomllib.loads(path.read_text())
    return HubConfig(
        url=os.environ.get("PRIME_HUB_URL") or data.get("url") or DEFAULT_URL,
        token=os.environ.get("PRIME_API_KEY") or data.get("token"),
    )


def save_config(url: str, token: str) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f'url = "{url}"\ntoken = "{token}"\n')
    os.chmod(path, 0o600)  # also when the file existed with looser permissions
    return path
