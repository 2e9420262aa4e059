"""Environment workers: environment code out of the caller's process, and across machines.

A rollout's environment code (``env_response``, tools, reward functions, sandboxes) runs in
worker processes, so a blocking reward function stalls only its worker, a crash (a segfaulting
extension, ``os._exit``, an OOM kill) costs only the groups that worker was running (they are
run once more elsewhere, then recorded as errors), and a run can use every core, or other
machines:

- ``WorkerPool`` (``verifiers.workers.pool``): N processes on this machine;
- ``RemoteWorkers`` (``verifiers.workers.remote``): one or more ``vf-env-server`` processes on
  other hosts, over TCP, authenticated and encrypted with a shared secret;
- ``RayPool`` (``verifiers.workers.ray_pool``): workers as Ray actors on a Ray cluster.

``Environment.generate(..., env_workers=...)`` takes any of them, or a spec that starts a pool for
the run: ``N``, ``"auto"`` (one per core), ``"ray"`` / ``"ray:N"``. ``vf-eval`` and the trainer use
workers by default. The wire protocol is in ``verifiers.workers.protocol``.
"""

from __future__ import annotations

import os
from typing import Any

from verifiers.workers.runner import EnvWorkers, WorkerGroups, client_config_of


def parse_spec(spec: int | str) -> tuple[str, int]:
    """``("processes" | "ray", workers)`` for a ``--env-workers`` value."""
    text = str(spec).strip().lower()
    kind = "processes"
    if text.startswith("ray"):
        kind, text = "ray", text[3:].lstrip(":") or "auto"
    if text == "auto":
        return kind, max(1, os.cpu_count() or 1)
    try:
        count = int(text)
    except ValueError:
        raise ValueError(
            f"--env-workers takes a number, 'auto', 'ray' or 'ray:N', got {spec!r}"
        ) from None
    if count < 1:
        raise ValueError(f"--env-workers must be at least 1, got {count}")
    return kind, count


async def start_workers(spec: int | str, env: Any) -> EnvWorkers:
    """Start workers for ``env`` (built by ``vf.load_environment``: workers load it by id)."""
    env_id = getattr(env, "loaded_as", None)
    if not env_id:
        raise ValueError(
            "environment workers load the environment by id (vf.load_environment); this one was "
            "built in this process. Install it (vf-install) and load it by id, or run in process"
        )
    kind, count = parse_spec(spec)
    release = str(env.release) if getattr(env, "release", None) is not None else None
    if kind == "ray":
        from verifiers.workers.ray_pool import RayPool

        return await RayPool(env_id, env.env_args, count, release=release).start()
    from verifiers.workers.pool import WorkerPool

    return await WorkerPool(env_id, env.env_args, count, release=release).start()


__all__ = ["EnvWorkers", "WorkerGroups", "client_config_of", "parse_spec", "start_workers"]
