"""Starting workers for a run from a ``--env-workers`` value: ``N``, ``"auto"`` (one per core),
``"ray"`` / ``"ray:N"``."""

from __future__ import annotations

import os
from typing import Any

from verifiers.workers.runner import EnvWorkers


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
