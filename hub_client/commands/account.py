"""``prime login``, ``prime whoami`` and ``prime token``: who you are on a hub."""

from __future__ import annotations

import getpass
import sys

from rich.table import Table

from hub_client.client import HubClient
from hub_client.commands.usage import UsageError, client, console, err
from hub_client.config import load_config, save_config
from hub_client.settings import (
    AccountDeleteSettings,
    LoginSettings,
    NoSettings,
    TokenCreateSettings,
    TokenRevokeSettings,
)
from hub_client.terminal import safe

# --- account -------------------------------------------------------------------------------------------


def cmd_login(args: LoginSettings) -> int:
    config = load_config()
    url = args.url or config.url
    if args.token:
        err.print(
            "[yellow]warning:[/yellow] --token puts the token on the command line, where every "
            "local user can read it (ps); pipe it in or type it at the prompt instead"
        )
    token = args.token or (
        sys.stdin.readline().strip()
        if not sys.stdin.isatty()
        else getpass.getpass("API token: ").strip()
    )
    me = HubClient(url, token).me()
    path = save_config(url, token)
    console.print(
        f"logged in to {url} as [bold]{me.user}[/bold] (scopes: {', '.join(me.scopes)}); saved to {path}"
    )
    return 0


def cmd_token_create(args: TokenCreateSettings) -> int:
    created = client().create_token(args.name, args.scope or ["read"], args.expires_in_days)
    err.print(
        f"token {created.id} ({', '.join(created.scopes)}; expires {created.expires_at or 'never'}); "
        "it is shown once:"
    )
    print(created.token)
    return 0


def cmd_token_list(_: NoSettings) -> int:
    table = Table(title="tokens")
    for col in ("id", "name", "scopes", "created", "expires", "revoked"):
        table.add_column(col)
    for t in client().list_tokens():
        table.add_row(
            str(t.id),
            safe(t.name),
            ", ".join(t.scopes),
            safe(t.created_at),
            safe(t.expires_at or "never"),
            "yes" if t.revoked else "",
        )
    console.print(table)
    return 0


def cmd_token_revoke(args: TokenRevokeSettings) -> int:
    client().revoke_token(args.id)
    console.print(f"revoked token {args.id}")
    return 0


def cmd_whoami(_: NoSettings) -> int:
    me = client().me()
    console.print(f"{me.user} (owners: {', '.join(me.owners)}; scopes: {', '.join(me.scopes)})")
    return 0


def cmd_account_delete(args: AccountDeleteSettings) -> int:
    """Deleting an account cannot be undone: ``--yes`` is required, and what went is listed."""
    who = f"the account of {args.user}" if args.user else "your account"
    if not args.yes:
        raise UsageError(
            f"this deletes {safe(who)} with its tokens and every environment it owns (their "
            "version numbers stay retired); confirm with --yes"
        )
    gone = client(login_required=True).delete_account(args.user)
    console.print(f"deleted the account of {safe(gone.user)}")
    for what, names in (("team", gone.teams), ("environment", gone.environments)):
        for name in names:
            console.print(f"  deleted {what} {safe(name)}")
    if args.user is None:
        err.print("the token prime is logged in with is gone with it; `prime login` to go on")
    return 0
