"""prime: publish, find and install environments on an Environments Hub; run a hub.

    prime hub serve [--data-dir ~/.prime-hub]      prime hub create-user NAME [--admin]
    prime login [--url URL]  (token from a prompt or stdin)   prime env init NAME
    prime env push [--path DIR] [--bump patch]     prime env install owner/name[@version] [--locked]
    prime env list | search | info | versions | yank | pull | uninstall | delete
    prime eval push RUN_DIR

Configuration: ~/.config/prime/config.toml (0600); PRIME_HUB_URL and PRIME_API_KEY override it.
Exit codes: 0 ok, 1 the hub or the installer refused (the message says why), 2 bad usage.
"""

from __future__ import annotations

import argparse
import signal
import sys

from hub_client.client import HubAPIError
from hub_client.commands_account import (
    cmd_login,
    cmd_token_create,
    cmd_token_list,
    cmd_token_revoke,
    cmd_whoami,
)
from hub_client.commands_attach import cmd_data_list, cmd_data_push, cmd_eval_push
from hub_client.commands_env import (
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
from hub_client.install import InstallError
from hub_client.terminal import safe
from hub_client.usage import UsageError, err
from hub_client.versions import BUMPS
from hub_protocol.wire import SORTS

# --- parser --------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prime", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    top = parser.add_subparsers(dest="group", required=True)

    # `prime hub ...` is the server's own command line (hub_server.cli), handed over in main()
    top.add_parser("hub", help="run a hub (prime hub -h: serve, create-user)")

    login = top.add_parser("login", help="store a hub URL and token")
    login.add_argument("--url")
    # kept for scripts, not advertised: argv is readable by every local user (ps)
    login.add_argument("--token", help=argparse.SUPPRESS)
    login.set_defaults(func=cmd_login)
    top.add_parser("whoami", help="show the current user").set_defaults(func=cmd_whoami)
    tokens = top.add_parser("token", help="API tokens").add_subparsers(
        dest="command", required=True
    )
    tc = tokens.add_parser("create", help="create a token (printed once)")
    tc.add_argument("name")
    tc.add_argument("--scope", action="append", choices=["read", "publish", "admin"])
    tc.add_argument("--expires-in-days", type=int, default=None)
    tc.set_defaults(func=cmd_token_create)
    tokens.add_parser("list", help="your tokens (never their secrets)").set_defaults(
        func=cmd_token_list
    )
    tr = tokens.add_parser("revoke", help="revoke a token by id")
    tr.add_argument("id", type=int)
    tr.set_defaults(func=cmd_token_revoke)

    env = top.add_parser("env", help="environments").add_subparsers(dest="command", required=True)
    init = env.add_parser("init", help="scaffold an environment (same as vf-init)")
    init.add_argument("name")
    init.add_argument("-p", "--path", default="./environments")
    init.add_argument("--multi-file", action="store_true")
    init.set_defaults(func=cmd_env_init)
    push = env.add_parser("push", help="build with uv and publish a version")
    push.add_argument("--path", default=".")
    push.add_argument("--owner", help="namespace (default: you; a team you belong to)")
    push.add_argument(
        "--visibility",
        choices=["public", "private"],
        default=None,
        help="a new environment is public unless given; an existing one keeps its visibility",
    )
    push.add_argument("--bump", choices=BUMPS, help="raise [project].version first")
    push.add_argument("--tag", action="append", default=[])
    push.set_defaults(func=cmd_env_push)
    inst = env.add_parser("install", help="install pinned environments")
    inst.add_argument("specs", nargs="*", metavar="owner/name[@version]")
    inst.add_argument(
        "--locked", action="store_true", help="install exactly what the lock file records"
    )
    inst.add_argument("--lock-file", default="environments.lock")
    inst.add_argument(
        "--python", default=None, help="the interpreter to install into (default: this one)"
    )
    inst.set_defaults(func=cmd_env_install)
    un = env.add_parser("uninstall")
    un.add_argument("spec")
    un.add_argument("--lock-file", default="environments.lock")
    un.add_argument("--python", default=None)
    un.set_defaults(func=cmd_env_uninstall)
    pl = env.add_parser("pull", help="download and extract the source")
    pl.add_argument("spec")
    pl.add_argument("-d", "--dir", default=".")
    pl.set_defaults(func=cmd_env_pull)
    for command, helptext in (("list", "list environments"), ("search", "search environments")):
        sub = env.add_parser(command, help=helptext)
        if command == "search":
            sub.add_argument("query")
        sub.add_argument("--owner")
        sub.add_argument("--tag")
        sub.add_argument("--sort", default="updated", choices=SORTS)
        sub.add_argument("--page", type=int, default=1)
        sub.add_argument("--output", choices=["table", "json"], default="table")
        sub.set_defaults(func=cmd_env_list)
    for command, func in (("info", cmd_env_info), ("versions", cmd_env_versions)):
        sub = env.add_parser(command)
        sub.add_argument("spec")
        sub.add_argument("--output", choices=["table", "json"], default="table")
        sub.set_defaults(func=func)
    yank = env.add_parser("yank", help="mark a version as yanked (PEP 592)")
    yank.add_argument("spec", metavar="owner/name@version")
    yank.add_argument("--reason")
    yank.add_argument(
        "--undo", action="store_true", help="un-yank: make the version installable again"
    )
    yank.set_defaults(func=cmd_env_yank)
    delete = env.add_parser(
        "delete", help="delete one version (owner/name@version) or an environment with all of them"
    )
    delete.add_argument("spec")
    delete.add_argument("--yes", action="store_true")
    delete.set_defaults(func=cmd_env_delete)

    data = top.add_parser("data", help="datasets made from rollouts (vf-data)").add_subparsers(
        dest="command", required=True
    )
    dp = data.add_parser("push", help="attach a vf-data dataset to the version it came from")
    dp.add_argument("dataset_dir")
    dp.add_argument("--env", help="owner/name@version (default: the one its runs name)")
    dp.set_defaults(func=cmd_data_push)
    dl = data.add_parser("list", help="datasets attached to a version")
    dl.add_argument("spec", help="owner/name[@version]")
    dl.add_argument("--output", choices=("table", "json"), default="table")
    dl.set_defaults(func=cmd_data_list)
    ev = top.add_parser("eval", help="eval results").add_subparsers(dest="command", required=True)
    evp = ev.add_parser("push", help="attach a vf-eval run to an environment version")
    evp.add_argument("run_dir")
    evp.add_argument("--env", help="owner/name@version (default: from the run's metadata)")
    evp.set_defaults(func=cmd_eval_push)
    return parser


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM ends prime as Ctrl-C does: cleanup (a pull's staging directory, an install's
    stage) runs on the way out."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    from verifiers.errors import UsageError as SDKUsageError  # what the SDK's checks raise

    usage_errors: tuple[type[Exception], ...] = (UsageError, SDKUsageError)
    if argv[:1] == ["hub"]:  # the server's commands: its module is imported only to run them
        from hub_server import cli as hub_cli

        args = hub_cli.build_parser("prime hub").parse_args(argv[1:])
        usage_errors = (UsageError, SDKUsageError, hub_cli.UsageError)
    else:
        args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _terminated)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        err.print("[red]prime:[/red] interrupted", highlight=False)
        return 130
    except usage_errors as exc:
        err.print(f"[red]prime:[/red] {safe(exc)}", soft_wrap=True, highlight=False)
        return 2
    except (HubAPIError, InstallError) as exc:
        err.print(f"[red]prime:[/red] {safe(exc)}", soft_wrap=True, highlight=False)
        return 1


if __name__ == "__main__":
    sys.exit(main())
