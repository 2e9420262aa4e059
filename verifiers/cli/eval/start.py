"""What a vf-eval run starts before its rollouts: the worker pool it launches before it loads the
environment itself (the workers' start overlaps everything else the run does first), and a v1
taskset loaded in place of a classic environment."""

from __future__ import annotations

from typing import Any

from verifiers.cli.endpoints import CLIError
from verifiers.cli.eval.settings import EvalSettings


def load_v1(args: EvalSettings, workers: Any, env_args: dict[str, Any]) -> Any:
    """A v1 taskset package (one exporting a ``verifiers.v1`` ``Taskset``) as a classic
    environment (``verifiers.v1.eval_env``); None for a classic id. v1 rollouts run in this
    process: env workers asked for explicitly are refused, the default is dropped.

    Only a plain local name is tried as a v1 taskset: an ``OWNER/NAME`` or ``NAME@VERSION`` id
    goes to the classic loader, whose owner and version checks run before the package's code
    (v1 packages from the hub are not supported yet). And the v1 machinery (about 1.5 s of
    imports) is loaded only when the package itself imported ``verifiers.v1``, as every v1
    taskset does: a classic run does not pay for it."""
    if not _may_be_v1(args.env):
        return None
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


def _may_be_v1(env_id: str) -> bool:
    """Whether ``env_id`` is a plain local name whose module imports ``verifiers.v1`` (the
    module is imported, as the classic loader would import it next)."""
    import importlib
    import importlib.util
    import sys

    from verifiers.loading.env_id import EnvId

    try:
        parsed = EnvId.parse(env_id)
        if parsed.owner or parsed.version or importlib.util.find_spec(parsed.module_name) is None:
            return False
        importlib.import_module(parsed.module_name)
    except Exception:  # the classic loader says what is wrong with it
        return False
    return "verifiers.v1" in sys.modules
