"""vf-eval's run: the settings checked, the environment loaded, the endpoint found (or the
built-in model server started), the rollouts generated (in worker processes, on env servers or
in this process) and saved, and the summary printed."""

from __future__ import annotations

import dataclasses
import logging
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from verifiers.cli.endpoints import CLIError
from verifiers.cli.eval.checks import (
    check_output_dirs,
    check_reachable,
    check_restored_confinement,
    check_restored_endpoint,
    check_resume_matches,
    check_same_env,
    check_sizes,
    execution_record,
    parse_headers,
    parse_json_object,
    restore_execution,
    resume_line,
    resume_settings,
    served_model,
    workers_setting,
)
from verifiers.cli.eval.clients import eval_client_config, make_eval_client
from verifiers.cli.eval.defaults import eval_defaults
from verifiers.cli.eval.embedded import (
    V1_MAX_TOKENS,
    WORKER_KEY_VAR,
    local_model_identity,
    run_endpoint,
    start_embedded,
)
from verifiers.cli.eval.rescore import rescore_run
from verifiers.cli.eval.settings import DEFAULT_API, EvalSettings, explicit, parse_args
from verifiers.cli.eval.start import load_and_launch
from verifiers.cli.run_identity import RunIdentity, differences
from verifiers.cli.usage import command, say_usage_error
from verifiers.logging_setup import log_to_stderr, safe

if TYPE_CHECKING:
    from verifiers.workers.runner import EnvWorkers


@command("vf-eval")
def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()  # the time to the first rollout is counted from here (-v)
    args = parse_args(argv)
    console = Console(stderr=True)
    log_to_stderr(
        logging.DEBUG if args.verbose else logging.WARNING, "%(levelname)s %(name)s: %(message)s"
    )
    from verifiers.logging_setup import NOISY_LOGGERS

    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    servers: list[Any] = []  # the built-in model server, when this run started one
    launched: list[Any] = []  # the worker pool launched before the environment was loaded
    # SIGTERM (a scheduler, `kill`, a closed terminal's session) stops the run as Ctrl-C does:
    # finished rollouts are saved and the line that continues the run is printed
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(args, console, servers, started, launched)
    except CLIError as exc:
        return say_usage_error("vf-eval", exc, console)
    finally:
        for pool in launched:  # launched, and the run stopped before it started them
            pool.abandon()
        for server in servers:
            server.stop()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _run(
    args: EvalSettings,
    console: Console,
    servers: list[Any],
    started: float | None = None,
    launched: list[Any] | None = None,
) -> int:
    from verifiers.errors import EnvironmentNotFoundError, EnvWorkerError, ResumeError
    from verifiers.loading.loader import load_environment
    from verifiers.results.layout import new_run_dir

    check_sizes(args)
    check_output_dirs(args)  # before anything is written or read: the user's own, or refused
    previous: dict[str, Any] = {}
    restored: dict[str, Any] = {}  # the resumed run's execution settings this command did not give
    if args.resume and not args.rescore:
        previous = resume_settings(Path(args.resume))
        check_same_env(args, previous, "--resume", args.resume)
        args, restored, said = restore_execution(args, previous, args.resume)
        for line in said:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    workers = workers_setting(args)  # a bad spec or secret is said before anything starts
    console.print(f"loading {escape(args.env)} ...", highlight=False)
    env_args = parse_json_object(args.env_args, "--env-args")
    typed_env_args = dict(env_args)
    sampling = parse_json_object(args.sampling_args, "--sampling-args")
    columns = [c.strip() for c in args.state_columns.split(",")] if args.state_columns else None
    headers = parse_headers(args.header)
    recorded: RunIdentity | None = None
    for key in ("max_tokens", "temperature"):
        if explicit(args, key) is not None:
            sampling[key] = getattr(args, key)
    if args.rescore:
        if args.resume:
            raise CLIError("--rescore and --resume each name a run; pass one of them")
        previous = resume_settings(Path(args.rescore), "--rescore")
        check_same_env(args, previous, "--rescore", args.rescore)
        env_args = env_args or previous.get("env_args", {})
    elif args.resume:
        recorded = RunIdentity.recorded(previous)
        if recorded is None:  # a run from before identities were recorded
            check_resume_matches(args, previous, args.resume)
            env_args = env_args or previous.get("env_args", {})
            sampling = {**previous.get("sampling_args", {}), **sampling}
        else:  # before loading or starting anything
            wrong = differences(recorded, _given_identity(args, env_args, sampling, columns))
            if wrong:
                raise CLIError(
                    f"--resume {args.resume} would change what the run is: {'; '.join(wrong)}. "
                    "Drop those flags to continue it (--resume restores every one), or start "
                    "a new run"
                )
            check_restored_endpoint(args, recorded, args.resume)
            env_args, sampling = dict(recorded.env_args), dict(recorded.sampling_args)
            columns = recorded.state_columns
    if args.rescore or args.resume:
        flag, run = ("--rescore", args.rescore) if args.rescore else ("--resume", args.resume)
        check_restored_confinement(typed_env_args, env_args, flag, str(run))
    key_var = args.api_key_var
    if recorded is not None and recorded.api_key_var and not args.given("api_key_var"):
        key_var = recorded.api_key_var
    if not args.rescore:  # a rescore calls no model
        endpoint, builtin_key = run_endpoint(args, recorded, previous, key_var, workers)
    try:
        if launched is not None and not args.rescore:
            env = load_and_launch(args.env, workers, env_args, launched)
        else:
            env = load_environment(args.env, **env_args)
    except EnvironmentNotFoundError as exc:
        raise CLIError(str(exc)) from exc
    except TypeError as exc:
        raise CLIError(str(exc)) from exc
    if args.rescore:
        return rescore_run(args, args.rescore, env, console)
    if recorded is not None and recorded.release and str(env.release) != recorded.release:
        raise CLIError(
            f"--resume {args.resume} ran {args.env} as verifiers {recorded.release}; installed "
            f"now, it runs as {env.release} (its package's verifiers requirement changed): "
            "its rows would differ. Start a new run"
        )
    defaults = eval_defaults(getattr(env, "env_distribution", None))
    n = _pick(
        explicit(args, "num_examples"),
        recorded.num_examples if recorded else previous.get("num_examples"),
        defaults.num_examples,
    )
    r = _pick(
        explicit(args, "rollouts_per_example"),
        previous.get("rollouts_per_example"),
        defaults.rollouts_per_example,
    )
    split = recorded.split if recorded else args.split
    seed = recorded.seed if recorded else args.seed
    concurrency = _pick(
        explicit(args, "max_concurrent"), restored.get("max_concurrent"), defaults.max_concurrent
    )
    for key in ("max_tokens", "temperature"):
        if getattr(defaults, key) is not None and key not in sampling:
            sampling[key] = getattr(defaults, key)
    sampling.setdefault("temperature", 1.0)  # the API default, sent and recorded explicitly
    api = args.api or (recorded.api if recorded else None) or endpoint.api or DEFAULT_API
    embedded = endpoint.base_url is None
    local_model: dict[str, str] | None = None
    if endpoint.base_url is None:
        if api != "chat":
            raise CLIError(
                f"--api {api} needs an endpoint that speaks it (-b URL); the built-in model server "
                "speaks chat and completions"
            )
        local_model = local_model_identity(endpoint.model, console)
        if getattr(env, "v1_env", None) is not None:
            sampling.setdefault("max_tokens", V1_MAX_TOKENS)
        endpoint = start_embedded(endpoint, console, args, servers, local_model, builtin_key)
    else:
        served = check_reachable(endpoint, headers, endpoint.key_var or key_var, api)
        if not endpoint.model:
            endpoint = dataclasses.replace(endpoint, model=served_model(endpoint, served))
    key_var = endpoint.key_var or key_var
    client = make_eval_client(api, endpoint, headers, key_var)
    identity = RunIdentity(
        env=args.env,
        env_args=env_args,
        split=split,
        seed=seed,
        num_examples=n,
        rollouts_per_example=r,
        sampling_args=sampling,
        model=endpoint.model,
        base_url=None if embedded else endpoint.url,
        api=api,
        api_key_var=key_var,
        release=str(env.release),
        state_columns=columns,
    )
    results_path = None
    if args.resume:
        results_path = str(args.resume)
    elif not args.no_save:
        results_path = str(new_run_dir(args.output_dir, env.env_id, endpoint.model))
    rows = env.dataset_rows(split, n=n, seed=seed)
    total = len(rows) * r
    console.print(
        f"[bold]{safe(env.env_id)}[/bold]: {len(rows)} examples × {r} rollouts on "
        f"[bold]{safe(endpoint.model)}[/bold] ({safe(endpoint.base_url)})",
        highlight=False,
    )
    if results_path:  # said before the first rollout: what a stop costs
        console.print(
            "[dim]Ctrl-C or SIGTERM stops the run with its finished rollouts saved and prints "
            "the line that resumes it[/dim]",
            highlight=False,
        )
    from verifiers.cli.display import LiveProgress, print_saved, show_examples, summary_table
    from verifiers.envs.environment import run_sync

    start = time.perf_counter()
    try:
        with LiveProgress(
            console, total, started=started if args.verbose else None
        ) as progress:
            out = run_sync(  # not asyncio.run: see run_sync
                _generate(
                    env,
                    rows,
                    client,
                    endpoint.model,
                    workers=workers,
                    launched=launched[0] if launched else None,
                    group_timeout=args.group_timeout,
                    client_config=eval_client_config(
                        api, endpoint, headers, WORKER_KEY_VAR if builtin_key else key_var
                    ),
                    sampling_args=sampling,
                    rollouts_per_example=r,
                    max_concurrent=concurrency,
                    results_path=results_path,
                    state_columns=columns,
                    on_progress=progress.update,
                    metadata={
                        "seed": seed,
                        "split": split,
                        "identity": identity.model_dump(),
                        "execution": execution_record(args, concurrency),
                        **(local_model or {}),
                    },
                )
            )
    except KeyboardInterrupt:
        if results_path:
            console.print(
                "[yellow]interrupted[/yellow]: finished rollouts are saved; continue with"
            )
            # one line, never wrapped or styled: a command to copy
            console.print(
                f"  {resume_line(args.env, results_path, identity)}",
                soft_wrap=True,
                markup=False,
                highlight=False,
            )
        return 130
    except (ResumeError, EnvWorkerError) as exc:
        raise CLIError(str(exc)) from exc
    wall = time.perf_counter() - start
    if args.verbose:
        show_examples(console, out.state)
    stdout = Console()
    stdout.print(summary_table(out.run_metadata, wall))
    if results_path is not None and args.traces and getattr(env, "v1_env", None) is None:
        from verifiers.v1.legacy import write_traces  # the bridge: classic rows as v1 traces

        write_traces(results_path, env.env_id)
    if results_path is not None:
        print_saved(stdout, results_path)
    limit_note = getattr(env, "limit_note", None)  # v1 tasksets (verifiers.v1.eval_env)
    note = limit_note(out.state) if limit_note is not None else None
    if note:
        console.print(f"[yellow]note[/yellow]: {escape(note)}", highlight=False, soft_wrap=True)
    failed = [s for s in out.state if s.get("error") is not None]
    if out.state and len(failed) == len(out.state):
        from verifiers.results.records import rebuild_error

        # an error record from a worker, the exception itself from a rollout run here
        first = rebuild_error(failed[0]["error"])
        console.print(
            f"[red]vf-eval:[/red] every rollout failed ({len(failed)}); the first: "
            f"{safe(type(first).__name__)}: {safe(first)}",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    return 0


async def _generate(
    env: Any,
    rows: list[dict[str, Any]],
    client: Any,
    model: str,
    *,
    workers: Any,
    client_config: Any,
    launched: Any = None,
    **kwargs: Any,
) -> Any:
    started: EnvWorkers | None = None
    try:
        if isinstance(workers, tuple):  # running env servers
            from verifiers.workers.remote import RemoteWorkers

            started = workers = await RemoteWorkers(workers[1], workers[2]).start()
        elif launched is not None and (launched.env_id, launched.env_args) == (
            getattr(env, "loaded_as", None),
            getattr(env, "env_args", None),
        ):
            release = getattr(env, "release", None)
            launched.release = str(release) if release is not None else None
            started = workers = await launched.start()
        elif workers is not None:
            if launched is not None:
                launched.abandon()
            from verifiers.workers import start_workers

            started = workers = await start_workers(workers, env)
        if workers is not None:
            client = client_config
        return await env.generate(rows, client, model, env_workers=workers, **kwargs)
    finally:
        if started is not None:
            await started.close()
        aclose = getattr(client, "aclose", None)
        if aclose is not None:
            await aclose()


def _given_identity(
    args: EvalSettings,
    env_args: dict[str, Any],
    sampling: dict[str, Any],
    columns: list[str] | None,
) -> dict[str, Any]:
    """The settings that decide a run's rows, as far as this command line gives them."""
    given: dict[str, Any] = {"env": args.env}
    if args.given("state_columns"):
        given["state_columns"] = columns
    if args.given("env_args"):
        given["env_args"] = env_args
    if sampling:
        given["sampling_args"] = sampling
    for name, key in (
        ("split", "split"),
        ("seed", "seed"),
        ("num_examples", "num_examples"),
        ("rollouts_per_example", "rollouts_per_example"),
        ("model", "model"),
        ("api_base_url", "base_url"),
        ("api", "api"),
        ("api_key_var", "api_key_var"),
    ):
        if args.given(name):
            given[key] = getattr(args, name)
    return given


def _pick(explicit: Any, resumed: Any, default: Any) -> Any:
    if explicit is not None:
        return explicit
    return resumed if resumed is not None else default
