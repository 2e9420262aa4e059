"""``prime hub``'s flags are made from ``HubSettings`` (hub_server.settings), and every other
``prime`` subcommand's from its model in hub_client.settings (each --help is compared with its
model in tests/cli/test_cli_settings.py): each setting is declared once, and the command line
keeps every flag, alias, choice and positional users and scripts have typed."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

import pytest

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


# every prime subcommand's usage (flags, short names, choices, positionals) before its flags were
# made from hub_client.settings: a script that typed one still can
PRIME_USAGE = {
    "login": "prime login [-h] [--url URL]",
    "whoami": "prime whoami [-h]",
    "token create": "prime token create [-h] [--scope {read,publish,admin}] [--expires-in-days EXPIRES_IN_DAYS] name",
    "token list": "prime token list [-h]",
    "token revoke": "prime token revoke [-h] id",
    "env init": "prime env init [-h] [-p PATH] [--multi-file] [--v1] name",
    "env push": "prime env push [-h] [--path PATH] [--owner OWNER] [--visibility {public,private}] [--bump {major,minor,patch,rc,post}] [--tag TAG]",
    "env install": "prime env install [-h] [--locked] [--lock-file LOCK_FILE] [--python PYTHON] [owner/name[@version] ...]",
    "env uninstall": "prime env uninstall [-h] [--lock-file LOCK_FILE] [--python PYTHON] spec",
    "env pull": "prime env pull [-h] [-d DIR] spec",
    "env list": "prime env list [-h] [--owner OWNER] [--tag TAG] [--sort {updated,created,name,downloads}] [--page PAGE] [--output {table,json}]",
    "env search": "prime env search [-h] [--owner OWNER] [--tag TAG] [--sort {updated,created,name,downloads}] [--page PAGE] [--output {table,json}] query",
    "env info": "prime env info [-h] [--output {table,json}] spec",
    "env versions": "prime env versions [-h] [--output {table,json}] spec",
    "env yank": "prime env yank [-h] [--reason REASON] [--undo] owner/name@version",
    "env delete": "prime env delete [-h] [--yes] spec",
    "data push": "prime data push [-h] [--env ENV] dataset_dir",
    "data list": "prime data list [-h] [--output {table,json}] spec",
    "eval push": "prime eval push [-h] [--env ENV] run_dir",
    "account delete": "prime account delete [-h] [--user USER] [--yes]",
}


def _subcommands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> set[str]:
    """Every leaf command under ``parser`` (``env push``, ``account delete``...)."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _subcommands(sub, (*words, name)) or {" ".join((*words, name))}
    return found


def test_every_prime_subcommand_has_its_usage_pinned():
    """A new command is added to PRIME_USAGE (and so to what scripts may rely on) with it."""
    from hub_client.cli import build_parser

    assert _subcommands(build_parser()) - {"hub"} == set(PRIME_USAGE)


def prime(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hub_client.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "1000"},
    )


@pytest.mark.parametrize("words", sorted(PRIME_USAGE))
def test_each_prime_subcommand_keeps_the_usage_scripts_typed(words, capsys, monkeypatch):
    from hub_client.cli import main

    monkeypatch.setenv("COLUMNS", "1000")
    with pytest.raises(SystemExit) as exit_:
        main([*words.split(), "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.splitlines()[0] == f"usage: {PRIME_USAGE[words]}"


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("env", "list", "--sort", "X"),
            "argument --sort: invalid choice: 'X' (choose from 'updated', 'created', 'name', "
            "'downloads')",
        ),
        (
            ("token", "create", "ci", "--scope", "root"),
            "argument --scope: invalid choice: 'root' (choose from 'read', 'publish', 'admin')",
        ),
        (("token", "revoke", "seven"), "argument id: invalid int value: 'seven'"),
        (("env", "pull"), "the following arguments are required: spec"),
        (("env", "list", "--page", "two"), "argument --page: invalid int value: 'two'"),
        (("env", "push", "--bump", "huge"), "argument --bump: invalid choice: 'huge'"),
    ],
)
def test_a_refused_prime_command_line_exits_2_with_its_subcommands_usage(args, message):
    done = prime(*args)
    assert done.returncode == 2, done.stderr
    words = " ".join(args[:2])
    assert done.stderr.startswith(f"usage: {PRIME_USAGE[words]}\n"), done.stderr
    assert f"prime {words}: error: {message}" in done.stderr
    assert done.stdout == ""


def test_a_hub_setting_out_of_range_is_refused_naming_its_variable(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hub_client.cli",
            "hub",
            "serve",
            "--data-dir",
            str(tmp_path),
            "--no-sdk",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PRIME_HUB_BLOB_COLLECT_INTERVAL": "-1"},
    )
    assert done.returncode == 1
    assert "PRIME_HUB_BLOB_COLLECT_INTERVAL: Input should be greater than or equal to 0" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr
