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
groups run concurrently inside it; Ray places the actors on the cluster's nodes. An actor that
dies is restarted by Ray, and the group it was running is sent once more; a second loss is an
error on the group's rollouts.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

from verifiers.workers.protocol import Response, RunGroupRequest, pack, unpack


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

    if any(os.environ.get(name) for name in RAY_TOKEN_VARIABLES):
        return
    if os.environ.get("RAY_AUTH_MODE", "token").lower() != "token":
        return
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
    if "ray" in sys.modules:  # a token this process's Ray loaded before (~/.ray's) is not ours
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


class RayPool:
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
    ) -> None:
        self.env_id, self.env_args = env_id, dict(env_args or {})
        self.num_workers, self.release, self.address, self.retries = (
            num_workers,
            release,
            address,
            retries,
        )
        self._actors: list[Any] = []
        self._inflight: list[int] = []
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
        actor = ray.remote(max_restarts=self.retries, max_task_retries=0)(_Actor)
        self._actors = [
            actor.options(max_concurrency=1000).remote(self.env_id, self.env_args, self.release)
            for _ in range(self.num_workers)
        ]
        self._inflight = [0] * self.num_workers
        await asyncio.gather(*(a.pid.remote() for a in self._actors))  # built: the env loaded
        return self

    async def run_group(self, request: RunGroupRequest) -> Response:
        ray = _ray()
        payload = pack(request)
        error = ""
        for _ in range(self.retries + 1):
            index = min(range(len(self._actors)), key=lambda i: self._inflight[i])
            self._inflight[index] += 1
            try:
                call = self._actors[index].handle.remote(payload)
                reply = await (
                    asyncio.wait_for(call, request.timeout + 30) if request.timeout else call
                )
                return Response.model_validate(unpack(reply))
            except (ray.exceptions.RayActorError, ray.exceptions.ActorDiedError) as exc:
                error = f"the Ray actor running this group died: {exc}"
            except TimeoutError:
                return Response(
                    success=False, error=f"no answer from the Ray actor within {request.timeout}s"
                )
            finally:
                self._inflight[index] -= 1
        return Response(
            success=False, error=f"{error} (recorded as an error after {self.retries + 1} tries)"
        )

    async def close(self) -> None:
        ray = _ray()
        for actor in self._actors:
            ray.kill(actor)
        self._actors = []
        if self._started_ray:
            ray.shutdown()

    def describe(self) -> dict[str, Any]:
        return {"kind": "ray", "workers": self.num_workers}
