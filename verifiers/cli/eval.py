"""vf-eval: evaluate a model on an environment and save the results.

With no endpoint (-b or an --endpoints alias) it starts the built-in server with the embedded
SmolLM2-135M-Instruct (or -m PATH, a local Hugging Face model directory) and stops it afterwards.
Results stream to outputs/evals/<env>--<model>/<run>/ and a killed run continues with --resume.

Exit codes: 0 the run happened (errored rollouts are counted, not fatal), 1 every rollout failed
(the message names the first error), 2 it could not start (bad environment id, bad JSON, bad
-n/-r/-c, unreachable endpoint or a URL that is not an API root), 130 interrupted (resumable).

Over 400 lines, not split: one command, read top to bottom (its settings, the checks that run
before anything starts, the run); the endpoint registry, the display, the results layout and
re-scoring are modules of their own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field
from rich.console import Console
from rich.markup import escape

from verifiers.cli.endpoints import (
    DEFAULT_KEY_VAR,
    DEFAULT_REGISTRY,
    Api,
    CLIError,
    Endpoint,
    resolve_endpoint,
)
from verifiers.cli.eval_defaults import EvalDefaults, eval_defaults
from verifiers.cli.run_identity import RunIdentity, differences
from verifiers.cli.settings import CommandSettings, Flag, parse_settings
from verifiers.local_model.models import DEFAULT_MODEL
from verifiers.workers.auth import DEFAULT_SECRET_FILE, SECRET_ENV

if TYPE_CHECKING:
    from verifiers.workers.runner import EnvWorkers

DEFAULT_API = "chat"  # the API an endpoint speaks unless --api or its alias says


def _table_setting(key: str) -> Any:
    """A setting an environment's ``[tool.verifiers.eval]`` table may default otherwise: its
    built-in default and help are :class:`EvalDefaults`'."""
    field = EvalDefaults.model_fields[key]
    return Field(
        field.default,
        description=f"{field.description}; an environment's [tool.verifiers.eval] may set "
        "another default",
    )


class EvalSettings(CommandSettings):
    """Every vf-eval flag: its default and help, declared once."""

    env: Annotated[str, Flag(positional=True)] = Field(
        description="environment id: name, owner/name or owner/name@version"
    )
    env_args: Annotated[str | None, Flag("-a")] = Field(
        None, description="JSON object passed to load_environment, e.g. '{\"n\": 10}'"
    )
    model: Annotated[str | None, Flag("-m")] = Field(
        None,
        description="model name, endpoint alias, or local model directory (none: the model -b's "
        f"server serves, or without -b the embedded {DEFAULT_MODEL})",
    )
    api_base_url: Annotated[str | None, Flag("-b")] = Field(
        None, description="OpenAI-compatible base URL, e.g. http://localhost:8000/v1"
    )
    api_key_var: Annotated[str, Flag("-k")] = Field(
        DEFAULT_KEY_VAR, description="environment variable holding the API key"
    )
    header: list[str] = Field(
        default_factory=list, description="extra HTTP header 'Name: value' (repeatable)"
    )
    api: Api | None = Field(
        None,
        description="the API the endpoint speaks: chat (OpenAI chat completions), completions, "
        "responses (OpenAI Responses) or anthropic (Anthropic Messages); none: an "
        f"endpoints.toml alias's api = ..., else {DEFAULT_API}",
    )
    endpoints: str | None = Field(
        None,
        description="TOML registry of model aliases (none: the user's "
        f"~/.config/verifiers/{DEFAULT_REGISTRY} if present; a ./{DEFAULT_REGISTRY} only when "
        "named here)",
    )
    num_examples: Annotated[int, Flag("-n")] = _table_setting("num_examples")
    rollouts_per_example: Annotated[int, Flag("-r")] = _table_setting("rollouts_per_example")
    max_concurrent: Annotated[int, Flag("-c")] = _table_setting("max_concurrent")
    max_tokens: Annotated[int | None, Flag("-t")] = _table_setting("max_tokens")
    temperature: Annotated[float | None, Flag("-T")] = _table_setting("temperature")
    sampling_args: Annotated[str | None, Flag("-S")] = Field(
        None, description="JSON object of sampling args, e.g. '{\"top_p\": 0.9}'"
    )
    save_results: Annotated[bool, Flag("-s")] = Field(
        False, description="(always on; kept for compatibility) save results"
    )
    no_save: bool = Field(False, description="do not write results to disk")
    state_columns: Annotated[str | None, Flag("-C")] = Field(
        None, description="comma-separated state keys to save in each row"
    )
    resume: Annotated[str | None, Flag(metavar="RUN_DIR")] = Field(
        None, description="continue an interrupted run in RUN_DIR"
    )
    rescore: Annotated[str | None, Flag(metavar="RUN_DIR")] = Field(
        None,
        description="score RUN_DIR's recorded rollouts again with the environment as installed "
        "now (no model calls), print what changed, and save them as a new run",
    )
    output_dir: str = Field("outputs", description="where outputs/evals/... goes")
    seed: int | None = Field(
        None, description="shuffle the dataset with this seed before taking -n examples"
    )
    split: Literal["eval", "train"] = Field(
        "eval",
        description="the rows to run: the eval split (the train split if there is none), or "
        "the train split (generating training data: vf-eval --split train -r 8, then vf-data)",
    )
    env_workers: str = Field(
        "auto",
        description="run the environment in worker processes: a number, auto (one per core), "
        "ray or ray:N (Ray actors on the Ray cluster in $RAY_ADDRESS, or a local one)",
    )
    no_env_workers: bool = Field(
        False, description="run the environment in this process (no workers)"
    )
    env_server: Annotated[list[str], Flag(metavar="HOST:PORT")] = Field(
        default_factory=list,
        description="use the workers of a running vf-env-server (repeatable: groups go to the "
        "least busy)",
    )
    env_secret_file: str | None = Field(
        None,
        description=f"the env servers' shared secret (none: ${SECRET_ENV}, then "
        f"{DEFAULT_SECRET_FILE})",
    )
    group_timeout: float | None = Field(
        None,
        gt=0,
        description="seconds one example's rollouts (generation and scoring) may take in the env "
        "workers: past it they are errors, a worker stuck in code that will not yield is replaced, "
        "and the groups beside it run on (none: no limit)",
    )
    verbose: Annotated[bool, Flag("-v")] = Field(
        False, description="debug logging and a few example rollouts"
    )


def parse_args(argv: list[str] | None) -> EvalSettings:
    return parse_settings(EvalSettings, argv, "vf-eval", __doc__)


def _explicit(args: EvalSettings, name: str) -> Any:
    """The value of a flag given on the command line, else None (a resumed run's, an
    environment's table or the built-in default applies)."""
    return getattr(args, name) if args.given(name) else None


def parse_json_object(text: str | None, flag: str) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CLIError(
            f"{flag} is not valid JSON ({exc.msg} at position {exc.pos}): {text!r}"
        ) from exc
    if not isinstance(value, dict):
        raise CLIError(
            f"{flag} must be a JSON object like '{{\"key\": 1}}', got {type(value).__name__}"
        )
    return value


def parse_headers(values: list[str]) -> dict[str, str]:
    headers = {}
    for value in values:
        name, sep, content = value.partition(":")
        if not sep or not name.strip():
            raise CLIError(f"--header must look like 'Name: value', got {value!r}")
        headers[name.strip()] = content.strip()
    return headers


def check_reachable(
    endpoint: Endpoint, headers: dict[str, str], key_var: str, api: str = "chat"
) -> list[str]:
    """Fail with what to do when the endpoint cannot be used; the ids of the models it lists."""
    import httpx

    url = endpoint.url.rstrip("/") + "/models"
    if api == "anthropic":
        from verifiers.clients.anthropic_messages_client import ANTHROPIC_VERSION

        if not endpoint.url.rstrip("/").endswith("/v1"):
            url = endpoint.url.rstrip("/") + "/v1/models"
        auth = {"anthropic-version": ANTHROPIC_VERSION}
        if endpoint.api_key and endpoint.api_key != "EMPTY":
            auth["x-api-key"] = endpoint.api_key
    else:
        auth = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    try:
        resp = httpx.get(url, headers={**auth, **headers}, timeout=10)
    except httpx.HTTPError as exc:
        raise CLIError(
            f"cannot reach {endpoint.base_url} ({type(exc).__name__}: {exc}); start the server or fix -b/--api-base-url"
        ) from exc
    if resp.status_code in (401, 403):
        if not os.environ.get(key_var):
            raise CLIError(
                f"{endpoint.base_url} needs an API key (HTTP {resp.status_code}) and ${key_var} is "
                f"not set: export {key_var}=..., or pass -k NAME of the variable that holds it"
            )
        raise CLIError(
            f"{endpoint.base_url} rejected the API key in ${key_var} (HTTP {resp.status_code}); "
            "check its value, or pass -k NAME of the variable that holds the right one"
        )
    if resp.status_code == 404:
        hint = (
            f"; did you mean {endpoint.url.rstrip('/')}/v1?"
            if not endpoint.url.rstrip("/").endswith("/v1")
            else ""
        )
        raise CLIError(
            f"{endpoint.base_url} is not an OpenAI-compatible API root ({url} is HTTP 404){hint}"
        )
    try:
        listed = resp.json().get("data")
        return [m["id"] for m in listed if isinstance(m, dict) and isinstance(m.get("id"), str)]
    except (ValueError, AttributeError, TypeError):  # not a model list: nothing to go on
        return []


def served_model(endpoint: Endpoint, served: list[str]) -> str:
    """``-b`` without ``-m``: the one model the server lists (vLLM and vf-serve list one)."""
    if len(served) == 1:
        return served[0]
    listing = f"it serves {', '.join(served)}" if served else "it lists no models"
    raise CLIError(f"-b {endpoint.base_url} without -m: {listing}; name one with -m MODEL")


def check_same_env(args: EvalSettings, previous: dict[str, Any], flag: str, run: str) -> None:
    """``--resume`` / ``--rescore`` act on a run of the environment named: say when it is not."""
    from verifiers.loading.env_id import EnvId, EnvIdError

    try:
        wanted = EnvId.parse(args.env)
        given = f"{wanted.owner}/{wanted.name}" if wanted.owner else wanted.name
    except EnvIdError:
        given = args.env
    run_env = str(previous.get("env_id", ""))
    if run_env and given.lower() != run_env.lower():
        raise CLIError(
            f"{flag} {run} is a run of {run_env}, not {args.env}; "
            f"use: vf-eval {run_env} {flag} {run}"
        )


def check_resume_matches(args: EvalSettings, previous: dict[str, Any], run: str) -> None:
    """A resumed run (``run``, the --resume directory) keeps its environment, model and rollouts
    per example: say which differs."""
    check_same_env(args, previous, "--resume", run)
    for flag, value, key in (
        ("-m/--model", args.model, "model"),
        (
            "-r/--rollouts-per-example",
            _explicit(args, "rollouts_per_example"),
            "rollouts_per_example",
        ),
    ):
        if value is not None and key in previous and str(value) != str(previous[key]):
            raise CLIError(
                f"--resume {run} was run with {key}={previous[key]!r}, not {value!r}; "
                f"drop {flag} to continue it, or start a new run"
            )


def resume_settings(run_dir: Path, flag: str = "--resume") -> dict[str, Any]:
    meta_path = run_dir / "metadata.json"
    if not meta_path.exists():
        raise CLIError(
            f"{flag} {run_dir}: no metadata.json there; pass the run directory printed by the first run"
        )
    return json.loads(meta_path.read_text())


def _rescore(args: EvalSettings, run_dir: str, env: Any, console: Console) -> int:
    """``--rescore RUN_DIR``: the recorded rollouts scored again, no model called."""
    from verifiers.cli.display import LiveProgress, summary_table
    from verifiers.envs.rescore import RescoreError, SavedRun, changes_table, compare, rescore
    from verifiers.results.layout import new_run_dir

    try:
        run = SavedRun.read(run_dir)
    except (RescoreError, ValueError) as exc:
        raise CLIError(str(exc)) from exc
    results_path = None
    if not args.no_save:
        results_path = str(new_run_dir(args.output_dir, env.env_id, run.metadata.model))
    total = len(run.example_ids) * run.metadata.rollouts_per_example
    console.print(
        f"[bold]{env.env_id}[/bold]: re-scoring {total} rollouts of {escape(run_dir)}",
        highlight=False,
    )
    start = time.perf_counter()
    with LiveProgress(console, total) as progress:
        out = asyncio.run(rescore(env, run, results_path, on_progress=progress.update))
    stdout = Console()
    stdout.print(summary_table(out.run_metadata, time.perf_counter() - start))
    stdout.print(changes_table(compare(run, out)))
    if results_path is not None:
        _print_saved(stdout, results_path)
    return 0


def _print_saved(stdout: Console, results_path: str) -> None:
    """Where a saved run is, and its report.html (written now, from what was saved)."""
    from verifiers.results.report import write_report

    stdout.print(f"results: {results_path}", soft_wrap=True)
    stdout.print(f"report: {write_report([results_path])}", soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()  # the time to the first rollout is counted from here (-v)
    args = parse_args(argv)
    console = Console(stderr=True)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    from verifiers.logging_setup import NOISY_LOGGERS

    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    servers: list[Any] = []  # the built-in model server, when this run started one
    # SIGTERM (a scheduler, `kill`, a closed terminal's session) stops the run as Ctrl-C does:
    # finished rollouts are saved and the line that continues the run is printed
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return _run(args, console, servers, started)
    except CLIError as exc:
        console.print(f"[red]vf-eval:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    finally:
        for server in servers:
            server.stop()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _run(
    args: EvalSettings, console: Console, servers: list[Any], started: float | None = None
) -> int:
    from verifiers.errors import EnvironmentNotFoundError, EnvWorkerError, ResumeError
    from verifiers.loading.loader import load_environment
    from verifiers.results.layout import new_run_dir

    for flag, value in (
        ("-n/--num-examples", _explicit(args, "num_examples")),
        ("-r/--rollouts-per-example", _explicit(args, "rollouts_per_example")),
        ("-c/--max-concurrent", _explicit(args, "max_concurrent")),
    ):
        if value is not None and (value == 0 or value < -1 or (flag[1] != "n" and value < 1)):
            allowed = "a positive number, or -1 for all" if flag[1] == "n" else "a positive number"
            raise CLIError(f"{flag} must be {allowed}, got {value}")
    workers = _workers_setting(args)  # a bad spec or secret is said before anything starts
    console.print(f"loading {escape(args.env)} ...", highlight=False)
    env_args = parse_json_object(args.env_args, "--env-args")
    sampling = parse_json_object(args.sampling_args, "--sampling-args")
    headers = parse_headers(args.header)
    previous: dict[str, Any] = {}
    recorded: RunIdentity | None = None
    for key in ("max_tokens", "temperature"):
        if _explicit(args, key) is not None:
            sampling[key] = getattr(args, key)
    if args.rescore:
        if args.resume:
            raise CLIError("--rescore and --resume each name a run; pass one of them")
        previous = resume_settings(Path(args.rescore), "--rescore")
        check_same_env(args, previous, "--rescore", args.rescore)
        env_args = env_args or previous.get("env_args", {})
    elif args.resume:
        previous = resume_settings(Path(args.resume))
        check_same_env(args, previous, "--resume", args.resume)
        recorded = RunIdentity.recorded(previous)
        if recorded is None:  # a run from before identities were recorded
            check_resume_matches(args, previous, args.resume)
            env_args = env_args or previous.get("env_args", {})
            sampling = {**previous.get("sampling_args", {}), **sampling}
        else:  # before loading or starting anything
            wrong = differences(recorded, _given_identity(args, env_args, sampling))
            if wrong:
                raise CLIError(
                    f"--resume {args.resume} would change what the run is: {'; '.join(wrong)}. "
                    "Drop those flags to continue it (--resume restores every one), or start "
                    "a new run"
                )
            env_args, sampling = dict(recorded.env_args), dict(recorded.sampling_args)
    try:
        env = load_environment(args.env, **env_args)
    except EnvironmentNotFoundError as exc:
        raise CLIError(str(exc)) from exc
    except TypeError as exc:
        raise CLIError(str(exc)) from exc
    if args.rescore:
        return _rescore(args, args.rescore, env, console)
    if recorded is not None and recorded.release and str(env.release) != recorded.release:
        raise CLIError(
            f"--resume {args.resume} ran {args.env} as verifiers {recorded.release}; installed "
            f"now, it runs as {env.release} (its package's verifiers requirement changed): "
            "its rows would differ. Start a new run"
        )
    defaults = eval_defaults(getattr(env, "env_distribution", None))
    n = _pick(
        _explicit(args, "num_examples"),
        recorded.num_examples if recorded else previous.get("num_examples"),
        defaults.num_examples,
    )
    r = _pick(
        _explicit(args, "rollouts_per_example"),
        previous.get("rollouts_per_example"),
        defaults.rollouts_per_example,
    )
    split = recorded.split if recorded else args.split
    seed = recorded.seed if recorded else args.seed
    concurrency = _pick(_explicit(args, "max_concurrent"), None, defaults.max_concurrent)
    for key in ("max_tokens", "temperature"):
        if getattr(defaults, key) is not None and key not in sampling:
            sampling[key] = getattr(defaults, key)
    sampling.setdefault("temperature", 1.0)  # the API default, sent and recorded explicitly
    key_var = args.api_key_var
    if recorded is not None and recorded.api_key_var and not args.given("api_key_var"):
        key_var = recorded.api_key_var
    endpoint = resolve_endpoint(
        args.model or (recorded.model if recorded else previous.get("model")),
        args.api_base_url or (recorded.base_url if recorded else None),
        key_var,
        args.endpoints,
    )
    api = args.api or (recorded.api if recorded else None) or endpoint.api or DEFAULT_API
    embedded = endpoint.base_url is None
    local_model: dict[str, str] | None = None
    if endpoint.base_url is None:
        if api != "chat":
            raise CLIError(
                f"--api {api} needs an endpoint that speaks it (-b URL); the built-in model server "
                "speaks chat and completions"
            )
        local_model = _local_model(endpoint.model, console)
        endpoint = _start_embedded(endpoint, console, args, servers, local_model)
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
    )
    results_path = None
    if args.resume:
        results_path = str(args.resume)
    elif not args.no_save:
        results_path = str(new_run_dir(args.output_dir, env.env_id, endpoint.model))
    rows = env.dataset_rows(split, n=n, seed=seed)
    total = len(rows) * r
    console.print(
        f"[bold]{env.env_id}[/bold]: {len(rows)} examples × {r} rollouts on [bold]{endpoint.model}[/bold] ({endpoint.base_url})"
    )
    from verifiers.cli.display import LiveProgress, show_examples, summary_table

    start = time.perf_counter()
    try:
        with LiveProgress(
            console, total, started=started if args.verbose else None
        ) as progress:
            out = asyncio.run(
                _generate(
                    env,
                    rows,
                    client,
                    endpoint.model,
                    workers=workers,
                    group_timeout=args.group_timeout,
                    client_config=eval_client_config(api, endpoint, headers, key_var),
                    sampling_args=sampling,
                    rollouts_per_example=r,
                    max_concurrent=concurrency,
                    results_path=results_path,
                    state_columns=[c.strip() for c in args.state_columns.split(",")]
                    if args.state_columns
                    else None,
                    on_progress=progress.update,
                    metadata={
                        "seed": seed,
                        "split": split,
                        "identity": identity.model_dump(),
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
                f"  vf-eval {args.env} --resume {results_path}",
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
    if results_path is not None:
        _print_saved(stdout, results_path)
    failed = [s for s in out.state if s.get("error") is not None]
    if out.state and len(failed) == len(out.state):
        first = failed[0]["error"]
        console.print(
            f"[red]vf-eval:[/red] every rollout failed ({len(failed)}); the first: "
            f"{escape(first['type'])}: {escape(first['message'])}",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    return 0


def make_eval_client(api: str, endpoint: Endpoint, headers: dict[str, str], key_var: str) -> Any:
    """The client for ``--api``: the lean chat-completions client, or the ``vf.Client`` of
    the completions, Responses or Anthropic Messages API (the key read from ``key_var``)."""
    from verifiers.clients import OpenAICompatibleClient, make_client
    from verifiers.clients.config import API_TO_CLIENT_TYPE, ClientConfig

    if api == "chat":
        return OpenAICompatibleClient(endpoint.url, endpoint.api_key, headers=headers)
    config = ClientConfig(
        client_type=API_TO_CLIENT_TYPE[api],
        api_base_url=endpoint.url,
        api_key_var=key_var,
        extra_headers=headers,
        max_retries=3,
        timeout=600.0,
    )
    return make_client(config)


def eval_client_config(api: str, endpoint: Endpoint, headers: dict[str, str], key_var: str) -> Any:
    """The serializable form of the run's client, for environment workers (they read the key
    from ``key_var`` in their own environment)."""
    from verifiers.clients.config import API_TO_CLIENT_TYPE, ClientConfig
    from verifiers.workers.runner import NO_KEY_VAR

    return ClientConfig(
        client_type=API_TO_CLIENT_TYPE[api],
        api_base_url=endpoint.url,
        api_key_var=key_var if endpoint.api_key and endpoint.api_key != "EMPTY" else NO_KEY_VAR,
        extra_headers=headers,
        max_retries=3,
        timeout=600.0,
    )


def _workers_setting(args: EvalSettings) -> Any:
    """What --env-workers / --env-server / --no-env-workers ask for: None (in process), a pool
    spec, or the addresses of running env servers."""
    if args.env_server:
        from verifiers.workers.auth import load_secret

        try:  # checked before anything starts: this user's own private file, a strong secret
            secret = load_secret(args.env_secret_file)
        except (OSError, ValueError) as exc:
            raise CLIError(f"--env-server: {exc}") from exc
        return ("remote", args.env_server, secret)
    if args.no_env_workers:
        return None
    from verifiers.workers import parse_spec

    try:
        parse_spec(args.env_workers)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
    return args.env_workers


async def _generate(
    env: Any,
    rows: list[dict[str, Any]],
    client: Any,
    model: str,
    *,
    workers: Any,
    client_config: Any,
    **kwargs: Any,
) -> Any:
    started: EnvWorkers | None = None
    try:
        if isinstance(workers, tuple):  # running env servers
            from verifiers.workers.remote import RemoteWorkers

            started = workers = await RemoteWorkers(workers[1], workers[2]).start()
        elif workers is not None:
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
    args: EvalSettings, env_args: dict[str, Any], sampling: dict[str, Any]
) -> dict[str, Any]:
    """The settings that decide a run's rows, as far as this command line gives them."""
    given: dict[str, Any] = {}
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


def _local_model(model: str, console: Console) -> dict[str, str] | None:
    """The path and content hash of a local model directory (None for the embedded model)."""
    path = Path(model).expanduser()
    if not path.is_dir():
        return None
    from verifiers.local_model.models import content_hash

    with console.status(f"hashing {path}"):
        return {"model_path": str(path.resolve()), "model_sha256": content_hash(path)}


def _start_embedded(
    endpoint: Endpoint,
    console: Console,
    args: EvalSettings,
    servers: list[Any],
    local: dict[str, str] | None,
) -> Endpoint:
    from verifiers.installs.sdk_guard import LOCAL_STACK_HINT
    from verifiers.processes.server import start_server

    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        raise CLIError(
            f"no endpoint given (-b) and the built-in model server needs {exc.name}: "
            f"{LOCAL_STACK_HINT}; or pass -b URL for another server"
        ) from exc
    log = Path(args.output_dir) / "logs" / f"vf-serve-{os.getpid()}.log"
    extra_args = []
    if local is not None:  # served (and filed) as <dir name>-<hash>: checkpoints stay apart
        extra_args = [
            "--served-model-name",
            f"{Path(local['model_path']).name}-{local['model_sha256'][:8]}",
        ]
    with console.status(f"starting the built-in model server ({endpoint.model}); log: {log}"):
        try:
            server = start_server(endpoint.model, log_path=log, extra_args=extra_args)
        except RuntimeError as exc:
            message = str(exc).strip().splitlines()[-1]
            raise CLIError(f"the built-in model server did not start: {message}") from exc
    servers.append(server)
    return Endpoint(server.model, server.base_url, "EMPTY")


if __name__ == "__main__":
    sys.exit(main())
