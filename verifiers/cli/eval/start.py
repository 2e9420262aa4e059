"""What a vf-eval run starts before its rollouts: the worker pool it launches before it loads the
environment itself (the workers' start overlaps everything else the run does first). A v1
taskset package loads as any environment does (``vf.load_environment``, which builds its
``TasksetEnvironment``), in this process and in the workers alike."""

from __future__ import annotations

from typing import Any


def launch_early(env_id: str, workers: Any, env_args: dict[str, Any]) -> Any:
    """The worker pool of a pool spec, launched now: its workers load the environment while
    this process loads it too, checks the endpoint and reads the dataset (``WorkerPool.launch``;
    the run starts the pool, which checks the release they loaded it as). None for in-process
    runs, Ray and env servers."""
    if workers is None or isinstance(workers, tuple):
        return None
    from verifiers.workers import parse_spec
    from verifiers.workers.pool import WorkerPool

    kind, count = parse_spec(workers)
    return WorkerPool(env_id, env_args, count).launch() if kind == "processes" else None
