"""``prime hub``'s flags are made from ``HubSettings`` (hub_server.settings): each setting is
declared once, and the command line keeps every flag users have typed."""

from __future__ import annotations

import re
import subprocess
import sys

from hub_server.cli import flag_name
from hub_server.settings import CREATE_USER, SERVE, HubSettings, hub_flag

# the flags `prime hub serve` has taken since before they were made from HubSettings
SERVE_FLAGS = {
    "--host",
    "--port",
    "--data-dir",
    "--db",
    "--blobs",
    "--s3-endpoint",
    "--public-url",
    "--trusted-proxy",
    "--sdk-wheel",
    "--no-sdk",
}
CREATE_USER_FLAGS = {"--admin", "--data-dir", "--db", "--blobs", "--s3-endpoint"}


def help_flags(*command: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-m", "hub_client.cli", "hub", *command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    options = done.stdout.split("options:", 1)[1]
    return set(re.findall(r"^\s+(--[a-z0-9-]+)", options, re.M)) - {"--help"}


def declared(command: str) -> set[str]:
    return {
        flag_name(name)
        for name, field in HubSettings.model_fields.items()
        if (flag := hub_flag(field)) and flag.command_line and command in flag.commands
    }


def test_hub_serve_help_shows_a_flag_for_each_hub_setting_and_only_those():
    shown = help_flags(SERVE)
    assert shown == declared(SERVE)
    assert shown == SERVE_FLAGS


def test_create_user_takes_the_storage_settings():
    assert help_flags(CREATE_USER) == declared(CREATE_USER) | {"--admin"} == CREATE_USER_FLAGS


def test_every_hub_setting_is_a_flag_or_an_environment_variable():
    for name, field in HubSettings.model_fields.items():
        flag = hub_flag(field)
        assert flag is not None, f"HubSettings.{name} has no HubFlag: how is it set?"
        assert flag.command_line or flag.env, name
        assert field.description, name
