"""What a vf-eval run starts before its rollouts: its worker pool, forked from this process right
after it loads the environment (each worker a copy of the loaded environment: no interpreter
start, import or load of its own), so the workers cost the run milliseconds and start while it
checks the endpoint, starts the built-in model server and reads the dataset. A v1 taskset package
loads as any environment does (``vf.load_environment``, which builds its
``TasksetEnvironment``), in this process and in the workers alike."""

from __future__ import annotations

import logging
import time
from typing import Any

logger = logging.getLogger("verifiers.workers")


def load_and_launch(
    env_id: str, workers: Any, env_args: dict[str, Any], launched: list[Any]
) -> Any:
    """``vf.load_environment(env_id, **env_args)``, and for a pool spec its worker pool, added to
    ``launched`` (the run starts it; ``abandon()`` ends it if the run stops first). The workers
    are forked from this process when that copies nothing but the environment
    (``forked.fork_safe``: no thread, and no socket or pipe its load opened); otherwise they are
    forked from a template process that imports and loads the environment itself
    (``WorkerPool.launch``). Ray and env servers start with the run."""
    from verifiers.loading.loader import load_environment
    from verifiers.workers.forked import fork_safe, open_channels

    count = _processes(workers)
    channels = open_channels() if count else set()
    env = load_environment(env_id, **env_args)
    if not count:
        return env
    from verifiers.workers.pool import WorkerPool

    loaded_as = getattr(env, "loaded_as", None) or env_id
    pool = WorkerPool(loaded_as, getattr(env, "env_args", env_args), count)
    started = time.perf_counter()
    if fork_safe(channels):
        launched.append(pool.fork(env))
        how = "forked from this process with its loaded environment"
    else:
        launched.append(pool.launch())
        how = (
            "launched from a template process (loading the environment started a thread or "
            "opened a socket or pipe, which forked workers would share)"
        )
    logger.debug(
        "%d env worker(s) %s in %.0f ms", count, how, (time.perf_counter() - started) * 1000
    )
    return env


def _processes(workers: Any) -> int:
    """The number of worker processes of a ``--env-workers`` spec; 0 for in-process runs, Ray
    and env servers."""
    if workers is None or isinstance(workers, tuple):
        return 0
    from verifiers.workers import parse_spec

    kind, count = parse_spec(workers)
    return count if kind == "processes" else 0
