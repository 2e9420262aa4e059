"""Environment workers as Ray actors (``--env-workers ray[:N]``; needs Ray: the ``ray`` extra).

For a user who already runs a Ray cluster: ``ray.init`` joins it (``$RAY_ADDRESS``, or
``address=``), or starts a local Ray instance when there is none. Each actor runs a
``WorkerRuntime`` (the same code as a worker process) on Ray's event loop for async actors, so
groups run concurrently inside it; Ray places the actors on the cluster's nodes. An actor that
dies is restarted by Ray, and the group it was running is sent once more; a second loss is an
error on the group's rollouts.
"""

from __future__ import annotations

import asyncio
from typing import Any

from verifiers.workers.protocol import Response, RunGroupRequest, pack, unpack


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        from verifiers.installs.extras import install_hint

        raise ImportError(f"--env-workers ray needs Ray: {install_hint('ray', 'ray')}") from exc
    return ray


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
        ray = _ray()
        if not ray.is_initialized():
            ray.init(address=self.address, ignore_reinit_error=True, log_to_driver=False)
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
