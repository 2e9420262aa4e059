"""What a vf-eval run starts before its rollouts: the worker processes it launches first thing
(their start overlaps everything else the run does first), and a v1 taskset loaded in place of a
classic environment."""

from __future__ import annotations

from typing import Any

from verifiers.cli.endpoints import CLIError
from verifiers.cli.eval.settings import EvalSettings


def load_v1(args: EvalSettings, workers: Any, env_args: dict[str, Any]) -> Any:
    """A v1 taskset package (one exporting a ``verifiers.v1`` ``Taskset``) as a classic
    environment (``verifiers.v1.eval_env``); None for a classic id. v1 rollouts run in this
    process: env workers asked for explicitly are refused, the default is dropped."""
    from verifiers.v1.eval_env import TasksetEnvironment, is_v1_taskset

    if not is_v1_taskset(args.env):
        return None
    if workers is not None and (args.given("env_workers") or args.given("env_server")):
        raise CLIError(
            f"{args.env} is a v1 taskset: env workers do not run v1 tasksets yet; drop "
            "--env-workers/--env-server or pass --no-env-workers"
        )
    try:
        return TasksetEnvironment(args.env, env=env_args.get("env"))
    except Exception as exc:
        raise CLIError(f"{args.env}: {type(exc).__name__}: {exc}") from exc


def prelaunch(workers: Any) -> list[Any]:
    """The worker processes of a pool spec, started now: each imports what every worker needs
    while this process loads the environment, checks the endpoint and reads the dataset (the
    pool hands them the environment to load when it starts). Not for Ray or env servers."""
    if workers is None or isinstance(workers, tuple):
        return []
    from verifiers.workers import parse_spec
    from verifiers.workers.pool import launch_worker

    kind, count = parse_spec(workers)
    return [launch_worker() for _ in range(count)] if kind == "processes" else []
