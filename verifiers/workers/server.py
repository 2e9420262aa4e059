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

import argparse
import asyncio
import json
import logging
import signal
import sys
from typing import Any

from verifiers.workers.protocol import (
    HEALTH_OK,
    HEALTH_PING,
    Response,
    RunRolloutRequest,
    pack,
    parse_request,
    unpack,
)
from verifiers.workers.runner import NO_KEY_VAR

logger = logging.getLogger("verifiers.workers.server")
LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_KEY_VARS = ("OPENAI_API_KEY", "VF_API_KEY")


def key_vars_of(config: Any) -> set[str]:
    """Every environment variable a request's client config would read a key from."""
    names = {config.api_key_var}
    names.update(endpoint.api_key_var for endpoint in config.endpoint_configs)
    return names


class EnvServer:
    """A ROUTER frontend on ``tcp://host:port`` in front of a worker pool."""

    def __init__(
        self,
        pool: Any,
        host: str,
        port: int,
        secret: str | None,
        *,
        key_vars: tuple[str, ...] = DEFAULT_KEY_VARS,
        max_message_bytes: int = 64 * 2**20,
    ) -> None:
        if secret is None and host not in LOOPBACK:
            raise ValueError(
                f"refusing to serve on {host} without a secret: anyone who can reach the port "
                "could run rollouts through this server (pass --secret-file, or bind 127.0.0.1)"
            )
        self.pool, self.host, self.port, self.secret = pool, host, port, secret
        self.key_vars = frozenset(key_vars) | {NO_KEY_VAR}
        self.max_message_bytes = max_message_bytes
        self._tasks: dict[tuple[bytes, bytes], asyncio.Task[None]] = {}

    async def serve(self, stop: asyncio.Event) -> None:
        import zmq
        import zmq.asyncio

        from verifiers.workers.auth import secure_server

        context = zmq.asyncio.Context()
        router = context.socket(zmq.ROUTER)
        router.setsockopt(zmq.LINGER, 0)
        router.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
        auth = secure_server(router, context, self.secret) if self.secret is not None else None
        router.bind(f"tcp://{self.host}:{self.port}")
        logger.info("serving %s on tcp://%s:%d", self.pool.env_id, self.host, self.port)
        try:
            while not stop.is_set():
                if not await router.poll(200):
                    continue
                frames = await router.recv_multipart()
                if len(frames) != 3:
                    continue
                caller, request_id, payload = frames
                if payload == HEALTH_PING:
                    await router.send_multipart([caller, request_id, pack(HEALTH_OK)])
                elif payload == b"":
                    task = self._tasks.pop((caller, request_id), None)
                    if task is not None:
                        task.cancel()
                else:
                    task = asyncio.create_task(self._answer(router, caller, request_id, payload))
                    self._tasks[(caller, request_id)] = task
        finally:
            for task in self._tasks.values():
                task.cancel()
            router.close()
            if auth is not None:
                auth.stop()
            context.term()

    async def _answer(self, router: Any, caller: bytes, request_id: bytes, payload: bytes) -> None:
        try:
            request = parse_request(unpack(payload))
            refused = (
                key_vars_of(request.client_config) - self.key_vars
                if hasattr(request, "client_config")
                else set()
            )
            if refused:
                response = Response(
                    success=False,
                    error=f"this env server does not read {', '.join(sorted(refused))} "
                    f"(it reads {', '.join(sorted(self.key_vars - {NO_KEY_VAR}))}; start it "
                    "with --key-var NAME to allow another)",
                )
            elif isinstance(request, RunRolloutRequest):
                response = await self.pool.run_group(request.as_group())
                response = Response(
                    success=response.success,
                    error=response.error,
                    output=(response.outputs or [None])[0],
                )
            elif request.request_type == "health":
                response = Response()
            else:
                response = await self.pool.run_group(request)
        except asyncio.CancelledError:
            return
        except Exception as exc:
            response = Response(success=False, error=f"{type(exc).__name__}: {exc}")
        finally:
            self._tasks.pop((caller, request_id), None)
        try:
            await router.send_multipart([caller, request_id, pack(response)])
        except Exception as exc:  # the caller went away
            logger.debug("could not answer %s: %s", caller, exc)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vf-env-server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("env", help="environment id (as for vf.load_environment)")
    p.add_argument("-a", "--env-args", default=None, help="JSON object passed to load_environment")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5555, help="TCP port (default 5555)")
    p.add_argument(
        "--workers", default="auto", help="worker processes: a number or auto (one per core)"
    )
    p.add_argument("--secret-file", default=None, help="file holding the shared secret")
    p.add_argument("--no-auth", action="store_true", help="no secret (loopback hosts only)")
    p.add_argument(
        "--key-var",
        action="append",
        default=None,
        help="an environment variable requests may read their API key from (repeatable; "
        "default OPENAI_API_KEY and VF_API_KEY)",
    )
    p.add_argument(
        "--max-message-mb",
        type=float,
        default=64.0,
        help="largest request accepted, in MiB (default 64)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    from verifiers.workers import parse_spec
    from verifiers.workers.auth import DEFAULT_SECRET_FILE, load_secret
    from verifiers.workers.pool import WorkerPool

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from verifiers.processes.open_files import raise_open_files_limit

    raise_open_files_limit()  # a stranger's connection flood must not exhaust descriptors
    try:
        env_args = json.loads(args.env_args) if args.env_args else {}
        _, count = parse_spec(args.workers)
    except (ValueError, json.JSONDecodeError) as exc:
        print(f"vf-env-server: {exc}", file=sys.stderr)
        return 2
    if args.no_auth and args.host not in LOOPBACK:
        print("vf-env-server: --no-auth is accepted on a loopback host only", file=sys.stderr)
        return 2
    try:
        secret = None if args.no_auth else load_secret(args.secret_file, create=True)
    except (OSError, ValueError) as exc:
        print(f"vf-env-server: {exc}", file=sys.stderr)
        return 2
    if secret is not None and args.secret_file is None:
        print(
            f"vf-env-server: callers need the secret in {DEFAULT_SECRET_FILE} (or $VF_ENV_SECRET)",
            file=sys.stderr,
        )

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with WorkerPool(args.env, env_args, count) as pool:
            print(
                f"vf-env-server: {args.env} with {count} workers on tcp://{args.host}:{args.port}",
                flush=True,
            )
            server = EnvServer(
                pool,
                args.host,
                args.port,
                secret,
                key_vars=tuple(args.key_var or DEFAULT_KEY_VARS),
                max_message_bytes=int(args.max_message_mb * 2**20),
            )
            await server.serve(stop)

    try:
        asyncio.run(run())
    except (RuntimeError, ValueError) as exc:
        print(f"vf-env-server: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
