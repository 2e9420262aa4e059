"""``vf-env-server``: an environment's workers behind one TCP address, for other machines.

    vf-env-server reverse-text --host 0.0.0.0 --port 5555 --workers auto
    vf-eval reverse-text --env-server gpu-box:5555 -b http://gpu-box:8000/v1   # on the caller

The server hosts a ``WorkerPool`` and a ROUTER socket speaking ``verifiers.workers.protocol``
(the env-server protocol of verifiers 0.1.10+; callers written for it send ``run_group`` /
``run_rollout`` / ``health``). Connections are encrypted and authenticated with CurveZMQ keys
derived from a shared secret (``verifiers.workers.auth``): ``--secret-file``, ``$VF_ENV_SECRET``,
or ``~/.cache/verifiers/env-server.secret`` (created on first use; copy it to the callers). A
caller without the secret is refused. ``--no-auth`` drops the lock for callers that cannot
do CURVE, and is accepted on a loopback host only.

A request names the environment variable its key is read from on this machine; only the
variables given with ``--key-var`` (default ``OPENAI_API_KEY`` and ``VF_API_KEY``) are read, so a caller cannot
have a worker send some other secret of this host to an address of its choosing. Messages
larger than ``--max-message-mb`` are dropped by ZMQ before they are read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Annotated

from pydantic import Field

from verifiers.cli.settings import CommandSettings, Flag, parse_settings
from verifiers.cli.usage import command
from verifiers.errors import UsageError
from verifiers.workers.server import DEFAULT_KEY_VARS, LOOPBACK, serve_until_stopped


class EnvServerSettings(CommandSettings):
    """Every vf-env-server flag: its default and help, declared once."""

    env: Annotated[str, Flag(positional=True)] = Field(
        description="environment id (as for vf.load_environment)"
    )
    env_args: Annotated[str | None, Flag("-a")] = Field(
        None, description="JSON object passed to load_environment"
    )
    host: str = Field("127.0.0.1", description="address to listen on")
    port: int = Field(5555, description="TCP port")
    workers: str = Field("auto", description="worker processes: a number or auto (one per core)")
    secret_file: str | None = Field(None, description="file holding the shared secret")
    no_auth: bool = Field(
        False,
        description="no secret (loopback hosts only): any local process may connect, so "
        "workers call endpoints with no API key",
    )
    key_var: list[str] = Field(
        default_factory=lambda: list(DEFAULT_KEY_VARS),
        description="an environment variable requests may read their API key from (repeatable; "
        "given, it replaces the default)",
    )
    max_message_mb: float = Field(64.0, description="largest request accepted, in MiB")


@command("vf-env-server")
def main(argv: list[str] | None = None) -> int:
    from verifiers.workers import parse_spec
    from verifiers.workers.auth import DEFAULT_SECRET_FILE, load_secret

    args = parse_settings(EnvServerSettings, argv, "vf-env-server", __doc__)
    from verifiers.logging_setup import log_to_stderr

    log_to_stderr(logging.INFO, "%(levelname)s %(name)s: %(message)s")
    from verifiers.processes.open_files import raise_open_files_limit

    raise_open_files_limit()  # a stranger's connection flood must not exhaust descriptors
    try:
        env_args = json.loads(args.env_args) if args.env_args else {}
        _, count = parse_spec(args.workers)
    except (ValueError, json.JSONDecodeError) as exc:
        raise UsageError(str(exc)) from exc
    if args.no_auth and args.host not in LOOPBACK:
        raise UsageError(
            "--no-auth is accepted on a loopback host only: use --host 127.0.0.1, or drop "
            "--no-auth and give callers the secret (--secret-file)"
        )
    if args.no_auth and args.key_var != list(DEFAULT_KEY_VARS):
        raise UsageError(
            "--key-var has no effect with --no-auth: without a secret any local process may "
            "connect, so the workers send no API key; use a secret (the default) for an "
            "endpoint that needs one"
        )
    try:
        secret = None if args.no_auth else load_secret(args.secret_file, create=True)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    if secret is not None and args.secret_file is None:
        print(
            f"vf-env-server: callers need the secret in {DEFAULT_SECRET_FILE} (or $VF_ENV_SECRET)",
            file=sys.stderr,
        )

    def ready() -> None:
        print(
            f"vf-env-server: {args.env} with {count} workers on tcp://{args.host}:{args.port}",
            flush=True,
        )

    try:
        asyncio.run(
            serve_until_stopped(
                args.env,
                env_args,
                count,
                args.host,
                args.port,
                secret,
                key_vars=tuple(args.key_var or DEFAULT_KEY_VARS),
                max_message_bytes=int(args.max_message_mb * 2**20),
                on_ready=ready,
            )
        )
    except (RuntimeError, ValueError) as exc:
        raise UsageError(str(exc)) from exc
    return 0


if __name__ == "__main__":
    sys.exit(main())
