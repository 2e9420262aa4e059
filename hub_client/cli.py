"""prime: publish, find and install environments on an Environments Hub; run a hub.

    prime hub serve [--data-dir ~/.prime-hub]      prime hub create-user NAME [--admin]
    prime login [--url URL]  (token from a prompt or stdin)   prime env init NAME
    prime env push [--path DIR] [--bump patch]     prime env install owner/name[@version] [--locked]
    prime env list | search | info | versions | yank | pull | uninstall | delete
    prime eval push RUN_DIR                        prime account delete [--user NAME] --yes

Configuration: ~/.config/prime/config.toml (0600); PRIME_HUB_URL and PRIME_API_KEY override it.
Exit codes: 0 ok, 1 the hub or the installer refused (the message says why), 2 bad usage.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from hub_client.client import HubAPIError
from hub_client.commands.account import (
    cmd_account_delete,
    cmd_login,
    cmd_token_create,
    cmd_token_list,
    cmd_token_revoke,
    cmd_whoami,
)
from hub_client.commands.attach import cmd_data_list, cmd_data_push, cmd_eval_push
from hub_client.commands.env import (
    cmd_env_delete,
    cmd_env_info,
    cmd_env_init,
    cmd_env_install,
    cmd_env_list,
    cmd_env_pull,
    cmd_env_push,
    cmd_env_uninstall,
    cmd_env_versions,
    cmd_env_yank,
)
from hub_client.commands.usage import UsageError, err
from hub_client.install import InstallError
from hub_client.settings import (
    AccountDeleteSettings,
    DataListSettings,
    DataPushSettings,
    EnvDeleteSettings,
    EnvInitSettings,
    EnvInstallSettings,
    EnvListSettings,
    EnvPullSettings,
    EnvPushSettings,
    EnvSearchSettings,
    EnvShowSettings,
    EnvUninstallSettings,
    EnvYankSettings,
    EvalPushSettings,
    LoginSettings,
    NoSettings,
    TokenCreateSettings,
    TokenRevokeSettings,
)
from hub_client.terminal import safe
from verifiers.cli.settings import CommandSettings, add_settings, validate_settings

# --- parser: each subcommand's flags made from its settings model (hub_client/settings.py) ---------------


@dataclass(frozen=True)
class Command:
    """A subcommand: its settings model, the parser made from it, and what runs it."""

    model: type[CommandSettings]
    parser: argparse.ArgumentParser
    func: Callable[[Any], int]

    def run(self, parsed: argparse.Namespace) -> int:
        """The command, given its validated settings; a value the model refuses is this
        subcommand's usage error (exit 2), as argparse's own refusals are."""
        return self.func(validate_settings(self.model, vars(parsed), self.parser))


def add_command(
    commands: Any,
    name: str,
    model: type[CommandSettings],
    func: Callable[[Any], int],
    help: str | None = None,
) -> None:
    """``name`` under ``commands`` (an ``add_subparsers``), its flags made from ``model``."""
    parser = commands.add_parser(name, **({"help": help} if help else {}))
    add_settings(parser, model)
    parser.set_defaults(command_=Command(model, parser, func))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prime", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    top = parser.add_subparsers(dest="group", required=True)

    # `prime hub ...` is the server's own command line (hub_server.cli), handed over in main()
    top.add_parser("hub", help="run a hub (prime hub -h: serve, create-user)")

    add_command(top, "login", LoginSettings, cmd_login, "store a hub URL and token")
    add_command(top, "whoami", NoSettings, cmd_whoami, "show the current user")
    tokens = top.add_parser("token", help="API tokens").add_subparsers(
        dest="command", required=True
    )
    add_command(
        tokens, "create", TokenCreateSettings, cmd_token_create, "create a token (printed once)"
    )
    add_command(tokens, "list", NoSettings, cmd_token_list, "your tokens (never their secrets)")
    add_command(tokens, "revoke", TokenRevokeSettings, cmd_token_revoke, "revoke a token by id")

    account = top.add_parser("account", help="your account").add_subparsers(
        dest="command", required=True
    )
    add_command(
        account,
        "delete",
        AccountDeleteSettings,
        cmd_account_delete,
        "delete your account (or, an admin, --user NAME's) and everything it owns",
    )

    env = top.add_parser("env", help="environments").add_subparsers(dest="command", required=True)
    add_command(
        env, "init", EnvInitSettings, cmd_env_init, "scaffold an environment (same as vf-init)"
    )
    add_command(env, "push", EnvPushSettings, cmd_env_push, "build with uv and publish a version")
    add_command(env, "install", EnvInstallSettings, cmd_env_install, "install pinned environments")
    add_command(env, "uninstall", EnvUninstallSettings, cmd_env_uninstall)
    add_command(env, "pull", EnvPullSettings, cmd_env_pull, "download and extract the source")
    add_command(env, "list", EnvListSettings, cmd_env_list, "list environments")
    add_command(env, "search", EnvSearchSettings, cmd_env_list, "search environments")
    add_command(env, "info", EnvShowSettings, cmd_env_info)
    add_command(env, "versions", EnvShowSettings, cmd_env_versions)
    add_command(env, "yank", EnvYankSettings, cmd_env_yank, "mark a version as yanked (PEP 592)")
    add_command(
        env,
        "delete",
        EnvDeleteSettings,
        cmd_env_delete,
        "delete one version (owner/name@version) or an environment with all of them",
    )

    data = top.add_parser("data", help="datasets made from rollouts (vf-data)").add_subparsers(
        dest="command", required=True
    )
    add_command(
        data,
        "push",
        DataPushSettings,
        cmd_data_push,
        "attach a vf-data dataset to the version it came from",
    )
    add_command(data, "list", DataListSettings, cmd_data_list, "datasets attached to a version")
    ev = top.add_parser("eval", help="eval results").add_subparsers(dest="command", required=True)
    add_command(
        ev,
        "push",
        EvalPushSettings,
        cmd_eval_push,
        "attach a vf-eval run to an environment version",
    )
    return parser


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM ends prime as Ctrl-C does: cleanup (a pull's staging directory, an install's
    stage) runs on the way out."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["hub"]:  # the server's commands: its module is imported only to run them
        from hub_server import cli as hub_cli

        args = hub_cli.build_parser("prime hub").parse_args(argv[1:])
        run: Callable[[], int] = partial(args.func, args)
    else:
        parsed = build_parser().parse_args(argv)
        run = partial(parsed.command_.run, parsed)
    signal.signal(signal.SIGTERM, _terminated)
    try:
        return run()
    except KeyboardInterrupt:
        err.print("[red]prime:[/red] interrupted", highlight=False)
        return 130
    except UsageError as exc:  # the SDK's, the server's and prime's own: one class
        err.print(f"[red]prime:[/red] {safe(exc)}", soft_wrap=True, highlight=False)
        return 2
    except (HubAPIError, InstallError) as exc:
        err.print(f"[red]prime:[/red] {safe(exc)}", soft_wrap=True, highlight=False)
        return 1


if __name__ == "__main__":
    sys.exit(main())
