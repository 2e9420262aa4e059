"""Where the hub is and who we are: ``~/.config/prime/config.toml`` (0600), env overrides."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from verifiers.cli.settings import Flag, environment_values

DEFAULT_URL = "http://127.0.0.1:8787"


def config_path() -> Path:
    root = os.environ.get("PRIME_CONFIG_DIR") or os.path.join(
        os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config"), "prime"
    )
    return Path(root) / "config.toml"


class HubConfig(BaseModel):
    """Where the hub is and who we are: the environment wins over the config file."""

    model_config = ConfigDict(extra="ignore")

    url: Annotated[str, Flag(env="PRIME_HUB_URL")] = Field(
        DEFAULT_URL, description="the hub's URL (prime login --url saves one)"
    )
    token: Annotated[str | None, Flag(env="PRIME_API_KEY")] = Field(
        None, description="the API token requests carry (prime login saves one)"
    )


def load_config() -> HubConfig:
    data: dict[str, Any] = {}
    path = config_path()
    if path.exists():
        data = tomllib.loads(path.read_text())
    saved = {key: value for key, value in data.items() if value}  # an empty url is no url
    return HubConfig.model_validate({**saved, **environment_values(HubConfig)})


def save_config(url: str, token: str) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f'url = "{url}"\ntoken = "{token}"\n')
    os.chmod(path, 0o600)  # also when the file existed with looser permissions
    return path
