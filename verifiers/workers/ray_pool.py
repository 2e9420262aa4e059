"""Environment workers as Ray actors (``--env-workers ray[:N]``; needs Ray: the ``ray`` extra).

For a user who already runs a Ray cluster: ``ray.init`` joins it (``$RAY_ADDRESS``, or
``address=``); without either it starts a local Ray instance of its own, in a 0700 directory of
this user's (:func:`ray_temp_dir`), never joining one it finds: Ray's default, ``/tmp/ray``, is
anyone's to create first, and its ``ray_current_cluster`` file names the cluster ``ray.init``
joins. Its token (Ray's authentication, on by default: its ports listen on every interface) is
kept in that directory, 0600 (:func:`private_ray_token`), not in ``~/.ray/auth_token``, which Ray
writes with the umask (0644) where any local user can read it when the home directory is 0755.
Each actor runs a
``WorkerRuntime`` (the same code as a worker process) on Ray's event loop for async actors, so
groups run concurrently inside it; Ray places the actors on the cluster's nodes.

Faults cost only their own, as in a pool of processes: the scheduling is the same
(``verifiers.workers.isolation``). An actor that dies (its process exited, was killed, or Ray's
OOM killer took it) is replaced by a new actor, not restarted by Ray; the groups it was running
are suspects, each run again alone on an actor reserved for them; a group that kills its actor
while alone, twice, is the culprit and an error on its rollouts with Ray's word of the cause.
Actors that keep dying are replaced after a growing pause, and then no longer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifiers.workers.isolation import IsolatingPool, _Pending, _Slot
from verifiers.workers.protocol import Response, pack, unpack


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        from verifiers.installs.extras import install_hint

        raise ImportError(f"--env-workers ray needs Ray: {install_hint('ray', 'ray')}") from exc
    return ray


def _ray_initialized() -> bool:
    """Whether this process is already connected to Ray, without importing it."""
    import sys

    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


def ray_temp_dir() -> Path:
    """The directory a local Ray instance of this user's keeps its sessions in:
    ``$TMPDIR/vf-ray-UID/ray``. ``vf-ray-UID`` is 0700 and refused (``EnvWorkerError``) when it
    is not this user's own (another local user made it first, or a link, or anyone may change it
    or a directory above it): Ray's sockets, logs and session files are what its processes
    trust. Ray makes its own directory 0777, so it goes one level below, out of others' reach."""
    from verifiers.errors import EnvWorkerError
    from verifiers.processes.own_dir import own_dir

    path = Path(tempfile.gettempdir()) / f"vf-ray-{os.geteuid()}"
    problem = own_dir(path, "Ray temp dir", 0o700)
    if problem:
        raise EnvWorkerError(f"cannot start a local Ray instance: {problem}")
    if path.stat().st_mode & 0o077:
        raise EnvWorkerError(
            f"cannot start a local Ray instance: {path} is open to others; chmod 700 it"
        )
    return path / "ray"


RAY_TOKEN_VARIABLES = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def private_ray_token(temp_dir: Path) -> None:
    """Have a local Ray instance (and its processes, which inherit the environment) use a token
    only this user can read: ``vf-ray-UID/auth_token``, 0600, made once and kept (a second
    instance of this user's shares it). Ray's own default, ``~/.ray/auth_token``, is written
    0644: with a 0755 home, another local user read it and ran code as this user on the GCS
    port, which listens on every interface. A token or mode the user set is theirs
    (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``, ``RAY_AUTH_MODE=disabled``) and kept."""
    import secrets
    import sys

    users_own = any(os.environ.get(name) for name in RAY_TOKEN_VARIABLES)
    if not users_own and os.environ.get("RAY_AUTH_MODE", "token").lower() == "token":
        token = temp_dir.parent / "auth_token"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        try:
            fd = os.open(token, flags, 0o600)
        except FileExistsError:
            pass  # made by an earlier start, in a directory only this user can write
        else:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(32))
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(token)
    # a token this process's Ray loaded before (~/.ray's, or an earlier instance's whose
    # settings changed since) is not necessarily the one in force now: read it again
    if "ray" in sys.modules:
        from ray._raylet import AuthenticationTokenLoader  # type: ignore[attr-defined]

        AuthenticationTokenLoader.instance().reset_cache()


class _Actor:
    """The actor's body: one environment, answering packed requests."""

    def __init__(self, env_id: str, env_args: dict[str, Any], release: str | None) -> None:
        import os

        if release:
            os.environ["VF_API_VERSION"] = release
        from verifiers.workers.runtime import WorkerRuntime

        self.runtime = WorkerRuntime(env_id, env_args)

    async def handle(self, payload: bytes) -> bytes:
        return pack(await self.runtime.handle(unpack(payload)))

    def pid(self) -> int:
        import os

        return os.getpid()


@dataclass(kw_only=True)
class _RayWorker(_Slot):
    actor: Any  # the actor's handle
    killed: bool = False

    def alive(self) -> bool:
        return not self.killed

    def kill(self) -> None:
        self.killed = True
        with contextlib.suppress(Exception):  # already gone
            _ray().kill(self.actor, no_restart=True)


def _cause(exc: BaseException) -> str:
    """What Ray says of an actor's death, in short: its exit type and detail (Ray does not
    pass on the process's exit code), else the start of its message."""
    import re

    text = " ".join(str(exc).split())
    kind = re.search(r"Worker exit type: (\w+)", text)
    detail = re.search(r"Worker exit detail: (.*?\.)(?: |$)", text)
    if kind and detail:
        return f"died (Ray: {kind.group(1)}, {detail.group(1)})"
    return f"died ({text[:300] or type(exc).__name__})"


class RayPool(IsolatingPool[_RayWorker]):
    """``num_workers`` Ray actors for one environment (see the module docstring)."""

    def __init__(
        self,
        env_id: str,
        env_args: dict[str, Any] | None = None,
        num_workers: int = 1,
        *,
        release: str | None = None,
        address: str | None = None,
        retries: int = 1,
        max_deaths_in_a_row: int | None = None,
    ) -> None:
        super().__init__(env_id, num_workers, retries, max_deaths_in_a_row)
        self.env_args, self.release, self.address = dict(env_args or {}), release, address
        self._actor_class: Any = None
        self._calls: dict[bytes, Any] = {}  # request id -> the ObjectRef of its call
        self._tasks: set[asyncio.Task[None]] = set()
        self._started_ray = False

    async def start(self) -> RayPool:
        address = self.address or os.environ.get("RAY_ADDRESS") or None
        local: dict[str, str] = {}
        if not address and not _ray_initialized():
            temp_dir = ray_temp_dir()
            private_ray_token(temp_dir)  # before Ray reads its settings
            local = {"_temp_dir": str(temp_dir)}
        ray = _ray()
        if not ray.is_initialized():
            ray.init(
                address=address or "local",
                ignore_reinit_error=True,
                log_to_driver=False,
                **local,
            )
            self._started_ray = True
        self._loop = asyncio.get_running_loop()
        # replaced by this pool, not restarted by Ray: a restart would take its groups again
        self._actor_class = ray.remote(max_restarts=0, max_task_retries=0)(_Actor)
        self._workers = [self._spawn(slot) for slot in range(self.num_workers)]
        try:
            await asyncio.gather(*(w.ready for w in self._workers))  # built: the env loaded
        except BaseException:
            await self.close()
            raise
        return self

    def _spawn(self, slot: int) -> _RayWorker:
        assert self._loop is not None
        actor = self._actor_class.options(max_concurrency=1000).remote(
            self.env_id, self.env_args, self.release
        )
        worker = _RayWorker(slot=slot, actor=actor, ready=self._loop.create_future())
        self._track(self._until_ready(worker))
        return worker

    def _track(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _until_ready(self, worker: _RayWorker) -> None:
        ray = _ray()
        try:
            await worker.actor.pid.remote()
        except ray.exceptions.RayError as exc:  # its creation failed, or it died meanwhile
            self._died(worker, _cause(exc))
            return
        if not worker.ready.done():
            worker.ready.set_result(True)
        self._flush_waiting()

    def _transmit(self, worker: _RayWorker, pending: _Pending[_RayWorker]) -> None:
        call = worker.actor.handle.remote(pending.payload)
        self._calls[pending.request_id] = call
        self._track(self._call(worker, pending.request_id, call))

    async def _call(self, worker: _RayWorker, request_id: bytes, call: Any) -> None:
        ray = _ray()
        try:
            reply = await call
        except ray.exceptions.RayActorError as exc:  # the actor died
            self._died(worker, _cause(exc))
            return
        except (ray.exceptions.TaskCancelledError, asyncio.CancelledError):
            return  # withdrawn, or the pool closed
        except Exception as exc:
            response = Response(success=False, error=f"{type(exc).__name__}: {exc}")
        else:
            try:
                response = Response.model_validate(unpack(reply))
            except Exception as exc:
                response = Response(success=False, error=f"unreadable reply: {exc}")
        finally:
            if self._calls.get(request_id) is call:
                del self._calls[request_id]
        self._answered(worker, request_id, response)

    def _withdraw(self, worker: _RayWorker, pending: _Pending[_RayWorker]) -> None:
        call = self._calls.pop(pending.request_id, None)
        if call is not None:
            with contextlib.suppress(Exception):  # finished or gone meanwhile
                _ray().cancel(call)

    async def close(self) -> None:
        self._closing = True
        self._answer_pending("the worker pool closed")
        for worker in self._workers:
            worker.kill()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._workers, self._calls = [], {}
        if self._started_ray:
            _ray().shutdown()

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "ray",
            "workers": self.num_workers,
            "restarts": self.restarts,
            "isolated": self.isolated,
        }
