"""``prime hub``: run a hub (``serve``) and create its users (``create-user``).

``hub_client.cli`` hands ``prime hub ...`` to :func:`main` here, importing this module only then,
so no other ``prime`` command loads the server. Every flag is made from a ``HubSettings`` field
(``hub_server.settings``: its type, default, help and environment variable, declared once).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args, get_origin

from pydantic import ValidationError

from hub_server.settings import CREATE_USER, SERVE, HubSettings, hub_flag
from verifiers.errors import UsageError  # the one usage error of every command (exit 2)

DB_ENV = "PRIME_HUB_DB"


def database_url(given: str | None) -> str | None:
    """``--db``, else ``$PRIME_HUB_DB``. A password is never taken from the command line, which
    every local user can read (``ps``, ``/proc/PID/cmdline``)."""
    from urllib.parse import urlsplit

    if given is not None:
        try:
            password = urlsplit(given).password
        except ValueError:
            password = None
        if password:
            raise UsageError(
                f"--db: a password on the command line is visible to every local user; put the "
                f"URL in ${DB_ENV}, or leave the password out and let PostgreSQL's client read "
                "it from $PGPASSWORD or ~/.pgpass"
            )
        return given
    return os.environ.get(DB_ENV) or None


# --- flags from HubSettings ----------------------------------------------------------------------


def flag_name(name: str) -> str:
    """The flag a user types for the setting ``name``."""
    flag = hub_flag(HubSettings.model_fields[name])
    return (flag and flag.name) or "--" + name.replace("_", "-")


def add_settings_flags(parser: argparse.ArgumentParser, command: str) -> None:
    """One flag per ``HubSettings`` field that ``command`` takes; the settings read from the
    environment only are listed after them."""
    groups: dict[str, Any] = {}
    environment = []
    for name, field in HubSettings.model_fields.items():
        flag = hub_flag(field)
        if flag is None or command not in flag.commands:
            continue
        if not flag.command_line:
            environment.append(f"  ${flag.env}  {field.description or ''}")
            continue
        kwargs: dict[str, Any] = {
            "dest": name,
            "help": (field.description or "").replace("%", "%%"),
        }
        annotation = _non_none(field.annotation)
        if flag.turns_off:
            kwargs.update(action="store_false", default=True)
        elif annotation is bool:
            kwargs.update(action="store_true", default=False)
        elif get_origin(annotation) is list:
            kwargs.update(action="append", default=None)
        else:
            scalar = annotation if annotation in (int, float) else str
            kwargs.update(type=scalar, default=flag.default or field.default)
            if field.is_required():
                kwargs["default"] = flag.default
        if flag.metavar:
            kwargs["metavar"] = flag.metavar
        target: Any = parser
        if flag.exclusive:
            if flag.exclusive not in groups:
                groups[flag.exclusive] = parser.add_mutually_exclusive_group()
            target = groups[flag.exclusive]
        target.add_argument(*flag.aliases, flag_name(name), **kwargs)
    if environment:
        parser.epilog = "read from the environment only:\n" + "\n".join(environment)


def _non_none(annotation: Any) -> Any:
    args = [a for a in get_args(annotation) if a is not type(None)]
    return args[0] if len(args) == 1 and type(None) in get_args(annotation) else annotation


def hub_settings(args: argparse.Namespace, command: str, **values: Any) -> HubSettings:
    """The settings the command line gave (and their environment variables), over ``values``."""
    for name, field in HubSettings.model_fields.items():
        flag = hub_flag(field)
        if flag is None or not flag.command_line or command not in flag.commands:
            continue
        value = getattr(args, name)
        if name == "db":
            value = database_url(value)  # never a password on the command line
        elif value is None and flag.env:
            value = os.environ.get(flag.env) or None
        if name == "data_dir":
            value = Path(value).expanduser()
        if value is not None:
            values.setdefault(name, value)
    try:
        return HubSettings(**values)
    except ValidationError as exc:  # a setting out of range, named as the user set it
        problems = []
        for error in exc.errors():
            setting = str(error["loc"][0]) if error["loc"] else ""
            flag = hub_flag(HubSettings.model_fields[setting]) if setting else None
            where = (flag.env if flag and flag.env and not flag.command_line else None) or (
                flag_name(setting) if setting else "a setting"
            )
            problems.append(f"{where}: {error['msg']}")
        raise SystemExit(f"prime hub: {'; '.join(problems)}") from None


def build_parser(prog: str = "prime hub") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="run a hub")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        SERVE, help="start the hub server", formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_settings_flags(serve, SERVE)
    serve.set_defaults(func=cmd_hub_serve)
    create = commands.add_parser(
        CREATE_USER, help="create a user in a hub's storage and print its token"
    )
    create.add_argument("name")
    create.add_argument("--admin", action="store_true")
    add_settings_flags(create, CREATE_USER)
    create.set_defaults(func=cmd_hub_create_user)
    return parser


# --- the commands --------------------------------------------------------------------------------


def own_storage(settings: HubSettings) -> None:
    """The hub's data dir (made 0700 when missing), a ``file:///`` blob dir with its staging
    dir beside it, and a ``sqlite:///`` file are the user's own (``verifiers.processes.own_dir``):
    in one another user made first, or under a directory they may change, the stored accounts
    and wheels would be theirs to read or plant. (``--blobs file:///tmp/b`` staged pushes in a
    ``/tmp/b.staging`` another user had made, and could delete or swap.)"""
    from urllib.parse import urlsplit

    from hub_server.db.blobs import local_staging_dir
    from verifiers.processes.own_dir import foreign_file_problem, own_dir

    problems = [own_dir(settings.data_dir, flag_name("data_dir"), 0o700)]
    if settings.blobs and urlsplit(settings.blobs).scheme == "file":
        blobs = Path(urlsplit(settings.blobs).path)
        problems.append(own_dir(blobs, "--blobs", 0o700))
        problems.append(own_dir(local_staging_dir(blobs), "--blobs (its staging dir)", 0o700))
    if settings.db and settings.db.startswith("sqlite:///"):
        problems.append(foreign_file_problem(Path(settings.db.removeprefix("sqlite:///")), "--db"))
    for problem in problems:
        if problem:
            raise UsageError(problem)


def port_problem(host: str, port: int) -> str | None:
    """Why the hub cannot listen there, found before anything is opened or built."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            return f"cannot listen on {host}:{port} ({exc.strerror}); pick another --port"
    return None


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def cmd_hub_serve(args: argparse.Namespace) -> int:
    from hub_server import create_app
    from hub_server.app import served
    from hub_server.edges.server import serve

    # stopped while it starts (building the SDK wheel in a temp dir, opening the stores), the
    # hub unwinds and removes what it made; once serving, uvicorn's own handlers take over
    signal.signal(signal.SIGTERM, _exit_on_signal)
    problem = port_problem(args.host, args.port)
    if problem:
        raise UsageError(problem)
    wildcard = args.host in ("0.0.0.0", "::", "")
    public_url = args.public_url or (None if wildcard else f"http://{args.host}:{args.port}")
    settings = hub_settings(args, SERVE, public_url=public_url)
    own_storage(settings)
    app = create_app(settings)
    where = settings.db or str(settings.data_dir)
    err(
        f"hub on http://{args.host}:{args.port} (metadata: {where}; files: {settings.blobs or settings.data_dir / 'files'})"
    )
    if public_url:
        err(
            f"this SDK for other machines: {public_url}/sdk/ (the pip command to install exactly it)"
        )
    else:
        err("links are path-absolute; pass --public-url https://HUB for the /sdk/ install line")
    serve(served(app), args.host, args.port, settings.read_timeout, settings.trusted_proxies)
    return 0


def cmd_hub_create_user(args: argparse.Namespace) -> int:
    from hub_server.errors import HubError
    from hub_server.services.hub import Hub

    settings = hub_settings(args, CREATE_USER)
    own_storage(settings)
    hub = Hub(settings)
    try:
        print(hub.create_user(args.name, args.admin))
    except HubError as exc:  # a name taken (or one that reads like it), a name not allowed
        raise UsageError(f"{exc.message} [{exc.code}]") from None
    finally:
        hub.close()
    return 0


# --- the entry point -----------------------------------------------------------------------------


def err(message: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(message, soft_wrap=True, highlight=False, markup=False)


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None, prog: str = "prime hub") -> int:
    """``python -m hub_server.cli ARGS``, as ``prime hub ARGS`` (which ``hub_client.cli`` runs
    itself): exit 0 done, 2 bad usage (the message says why), 130 interrupted."""
    args = build_parser(prog).parse_args(argv)
    signal.signal(signal.SIGTERM, _terminated)
    name = prog
    try:
        return args.func(args)
    except KeyboardInterrupt:
        err(f"{name}: interrupted")
        return 130
    except UsageError as exc:  # printed without the control characters a name may carry
        err(f"{name}: " + "".join(c for c in str(exc) if c.isprintable()))
        return 2


if __name__ == "__main__":
    sys.exit(main(prog="python -m hub_server.cli"))
