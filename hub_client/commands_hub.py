"""``prime hub``: run a hub (serve) and create its users."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from hub_client.usage import UsageError, err

# --- hub -----------------------------------------------------------------------------------------------


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


def hub_settings(args: argparse.Namespace, public_url: str | None = None):
    from hub_server import HubSettings

    return HubSettings(
        data_dir=Path(args.data_dir).expanduser(),
        db=database_url(args.db),
        blobs=args.blobs,
        s3_endpoint=args.s3_endpoint,
        public_url=public_url,
        trusted_proxies=getattr(args, "trusted_proxy", None) or [],
        sdk_wheel=getattr(args, "sdk_wheel", None),
        build_sdk=not getattr(args, "no_sdk", False),
    )


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
    from hub_server.edges.server import serve

    # stopped while it starts (building the SDK wheel in a temp dir, opening the stores), the
    # hub unwinds and removes what it made; once serving, uvicorn's own handlers take over
    signal.signal(signal.SIGTERM, _exit_on_signal)
    problem = port_problem(args.host, args.port)
    if problem:
        raise UsageError(problem)
    wildcard = args.host in ("0.0.0.0", "::", "")
    public_url = args.public_url or (None if wildcard else f"http://{args.host}:{args.port}")
    settings = hub_settings(args, public_url)
    app = create_app(settings)
    where = settings.db or str(settings.data_dir)
    err.print(
        f"hub on http://{args.host}:{args.port} (metadata: {where}; files: {settings.blobs or settings.data_dir / 'files'})"
    )
    if public_url:
        err.print(
            f"this SDK for other machines: {public_url}/sdk/ (the pip command to install exactly it)"
        )
    else:
        err.print(
            "links are path-absolute; pass --public-url https://HUB for the /sdk/ install line"
        )
    serve(app, args.host, args.port, settings.read_timeout, settings.trusted_proxies)
    return 0


def cmd_hub_create_user(args: argparse.Namespace) -> int:
    from hub_server import Hub
    from hub_server.errors import HubError

    hub = Hub(hub_settings(args))
    try:
        print(hub.create_user(args.name, args.admin))
    except HubError as exc:  # a name taken (or one that reads like it), a name not allowed
        raise UsageError(f"{exc.message} [{exc.code}]") from None
    finally:
        hub.close()
    return 0
