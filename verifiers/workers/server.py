"""The env server: an environment's worker pool behind one TCP address (``vf-env-server``,
``verifiers.cli.env_server``, is its command line).

:class:`EnvServer` hosts a ``WorkerPool`` behind a ROUTER socket speaking
``verifiers.workers.protocol`` (the env-server protocol of verifiers 0.1.10+; callers written for
it send ``run_group`` / ``run_rollout`` / ``health``), encrypted and authenticated with CurveZMQ
keys derived from a shared secret (``verifiers.workers.auth``); without a secret it serves a
loopback host only. A request's key is read only from the environment variables the server was
given (``key_vars``), so a caller cannot have a worker send some other secret of this host to an
address of its choosing; without a secret it reads none (``keyless``: any local process could
otherwise spend this user's key, or send it to an endpoint of its own). Messages larger than
``max_message_bytes`` are dropped by ZMQ before they are read, and one that would decode into
many times its size is refused while it decodes (``protocol.unpack_bounded``); a large request is decoded and validated in steps, the event
loop free between them (``protocol.unpack_bounded_in_steps``, ``stepped_validation``).
Connections reach the ROUTER through a per-peer gate (``gate.Gate``): a peer's guesses of the
secret past a budget, and its connections past a few mid-handshake, are refused, and other peers
are not.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from verifiers.processes.socket_dirs import socket_dir
from verifiers.workers.gate import PeerBudgets
from verifiers.workers.protocol import (
    DRAIN,
    HEALTH_OK,
    HEALTH_PING,
    UNAVAILABLE,
    Response,
    RunRolloutRequest,
    pack,
    read_request,
)
from verifiers.workers.runner import NO_KEY_VAR

logger = logging.getLogger("verifiers.workers.server")
SOCKET_DIR_PREFIX = "vf-env-server-"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_KEY_VARS = ("OPENAI_API_KEY", "VF_API_KEY")


def key_vars_of(config: Any) -> set[str]:
    """Every environment variable a request's client config would read a key from."""
    names = {config.api_key_var}
    names.update(endpoint.api_key_var for endpoint in config.endpoint_configs)
    return names


def keyless(config: Any) -> Any:
    """``config`` reading no key. A server without a secret is anyone's on this machine (any
    local process may connect to a loopback port), so it sends none of this host's keys to an
    endpoint its caller names: its workers call every endpoint with no key."""
    endpoints = [e.model_copy(update={"api_key_var": NO_KEY_VAR}) for e in config.endpoint_configs]
    return config.model_copy(update={"api_key_var": NO_KEY_VAR, "endpoint_configs": endpoints})


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
        budgets: PeerBudgets | None = None,
    ) -> None:
        if secret is None and host not in LOOPBACK:
            raise ValueError(
                f"refusing to serve on {host} without a secret: anyone who can reach the port "
                "could run rollouts through this server (pass --secret-file, or bind 127.0.0.1)"
            )
        self.pool, self.host, self.port, self.secret = pool, host, port, secret
        self.key_vars = frozenset(key_vars) | {NO_KEY_VAR}
        self.max_message_bytes = max_message_bytes
        self.budgets = budgets or PeerBudgets()
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
        close_front_door = await self._open_front_door(router)
        logger.info("serving %s on tcp://%s:%d", self.pool.env_id, self.host, self.port)
        # what is queued is read without a wait, up to ``DRAIN`` a turn of the loop, and pings
        # answered at once: the async socket's ``poll`` and ``recv`` for every message (a
        # poller, futures and a timer each) cost ~90 us of a ping's ~105 of server CPU
        plain: Any = zmq.Socket.shadow(router.underlying)
        try:
            while not stop.is_set():
                if not await router.poll(200):
                    continue
                for _ in range(DRAIN):
                    try:
                        frames = plain.recv_multipart(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    if len(frames) == 3:
                        self._take(router, plain, *frames)
        finally:
            await close_front_door()
            for task in self._tasks.values():
                task.cancel()
            router.close()
            if auth is not None:
                auth.stop()
            context.term()

    def _take(
        self, router: Any, plain: Any, caller: bytes, request_id: bytes, payload: bytes
    ) -> None:
        """One request read: a ping answered (``plain``: the ROUTER without its async
        wrapper; a ROUTER's send never waits), a cancel done, anything else a task."""
        if payload == HEALTH_PING:
            import zmq

            try:
                plain.send_multipart([caller, request_id, pack(self._health())], zmq.NOBLOCK)
            except zmq.ZMQError as exc:  # the caller went away
                logger.debug("could not answer %s: %s", caller, exc)
        elif payload == b"":
            task = self._tasks.pop((caller, request_id), None)
            if task is not None:
                task.cancel()
        else:
            task = asyncio.create_task(self._answer(router, caller, request_id, payload))
            self._tasks[(caller, request_id)] = task

    async def _open_front_door(self, router: Any) -> Callable[[], Awaitable[None]]:
        """``router`` on a Unix socket in a private directory, behind the per-peer gate
        listening on ``host:port``; returns what closes them."""
        from verifiers.workers.auth import listening_socket
        from verifiers.workers.gate import Gate

        private = socket_dir(SOCKET_DIR_PREFIX, "router")  # 0700: the gate's alone
        upstream = os.path.join(private, "router")
        router.bind(f"ipc://{upstream}")
        gate = Gate(upstream, self.budgets)
        listener = await gate.start(listening_socket(self.host, self.port))

        async def close() -> None:
            listener.close()
            gate.close_all()
            shutil.rmtree(private, ignore_errors=True)

        return close

    async def _read_request(self, payload: bytes) -> Any:
        """A request frame decoded within its cost bound and validated in steps."""
        return await read_request(payload)

    def _health(self) -> dict[str, Any]:
        """A health probe's answer: unhealthy once the pool gave up (its workers kept dying),
        so callers send their groups to other servers rather than have each answered with
        that error."""
        broken = getattr(self.pool, "broken", None)
        if broken is None:
            return HEALTH_OK
        return {**HEALTH_OK, "success": False, "error": broken, "fault": UNAVAILABLE}

    async def _answer(self, router: Any, caller: bytes, request_id: bytes, payload: bytes) -> None:
        try:
            request = await self._read_request(payload)
            if self.secret is None and hasattr(request, "client_config"):
                request = request.model_copy(
                    update={"client_config": keyless(request.client_config)}
                )
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
                    fault=response.fault,
                    output=(response.outputs or [None])[0],
                )
            elif request.request_type == "health":
                response = Response.model_validate(self._health())
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


async def serve_until_stopped(
    env_id: str,
    env_args: dict[str, Any],
    count: int,
    host: str,
    port: int,
    secret: str | None,
    *,
    key_vars: tuple[str, ...] = DEFAULT_KEY_VARS,
    max_message_bytes: int = 64 * 2**20,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """``count`` workers of ``env_id`` served on ``tcp://host:port`` until SIGINT or SIGTERM;
    ``on_ready`` is called once the workers are up."""
    from verifiers.workers.pool import WorkerPool

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # launched from a template (as vf-eval's are): its replacements and the workers that run
    # suspects fork in milliseconds, all suspects at once in shares (without one, they ran
    # alone one after another on a reserved worker, while half the workers ran nothing else)
    async with WorkerPool(env_id, env_args, count).launch() as pool:
        if on_ready is not None:
            on_ready()
        server = EnvServer(
            pool, host, port, secret, key_vars=key_vars, max_message_bytes=max_message_bytes
        )
        await server.serve(stop)
