"""vf-eval's checks before anything starts: the flags' values (sizes, JSON, headers, workers),
the endpoint (reachable, an API root, which model it serves) and a run to resume or re-score
(its environment, model and rollouts per example). Each failure is a ``CLIError``: one line,
exit 2."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from verifiers.cli.endpoints import DEFAULT_KEY_VAR, CLIError, Endpoint
from verifiers.cli.eval.settings import ON_RESUME, WORKERS, EvalSettings, OnResume, explicit
from verifiers.cli.run_identity import RunIdentity
from verifiers.cli.settings import default_text, flag_text


def check_sizes(args: EvalSettings) -> None:
    """-n, -r and -c as given on the command line: -n positive or -1 (all), -r and -c positive."""
    for flag, value in (
        ("-n/--num-examples", explicit(args, "num_examples")),
        ("-r/--rollouts-per-example", explicit(args, "rollouts_per_example")),
        ("-c/--max-concurrent", explicit(args, "max_concurrent")),
    ):
        if value is not None and (value == 0 or value < -1 or (flag[1] != "n" and value < 1)):
            allowed = "a positive number, or -1 for all" if flag[1] == "n" else "a positive number"
            raise CLIError(f"{flag} must be {allowed}, got {value}")


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


def check_restored_confinement(
    typed: dict[str, Any], restored: dict[str, Any], flag: str, run: str
) -> None:
    """A run dir restores its environment arguments, but never one that turns the sandbox off
    or chooses where a request goes and which key it carries by itself: a run dir is a file
    someone may have edited or sent, ``sandbox_mode: unsafe`` runs the model's code as the
    user, and a judge's ``judge_base_url`` with ``judge_api_key_var`` sends that key there
    (``--rescore`` runs the judge too). The user types them again to confirm."""
    if restored.get("sandbox_mode") == "unsafe" and typed.get("sandbox_mode") != "unsafe":
        raise CLIError(
            f"{flag} {run} records the env arg sandbox_mode 'unsafe' (the model's code runs "
            "with no sandbox); a run dir does not turn confinement off on its own. To continue "
            f"it so, give the run's env args again: -a '{json.dumps(restored)}'"
        )
    untyped = sorted(k for k, v in endpoint_env_args(restored).items() if typed.get(k) != v)
    if untyped:
        raise CLIError(
            f"{flag} {run} records the env args {', '.join(untyped)} (where the environment's "
            "requests go and which key they carry); a run dir does not choose where a key is "
            f"sent on its own. To continue it so, give the run's env args again: "
            f"-a '{json.dumps(restored)}'"
        )


ENDPOINT_ARG_SUFFIXES = ("base_url", "key_var")
"""Env args whose names end so say where a request goes or which variable's key it carries
(``judge_base_url``, ``judge_api_key_var``): a run dir alone never restores them."""


def endpoint_env_args(env_args: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in env_args.items() if k.lower().endswith(ENDPOINT_ARG_SUFFIXES)}


def key_sent(identity: RunIdentity) -> bool:
    """Whether continuing ``identity`` would send a key (its variable set here) to an endpoint
    the run named (not the built-in server it starts itself)."""
    var = identity.api_key_var
    return bool(identity.base_url and var and os.environ.get(var))


def check_restored_endpoint(args: EvalSettings, recorded: RunIdentity, run: str) -> None:
    """``--resume`` restores the run's endpoint and key variable, but not both at once on the
    run dir's word: an edited ``metadata.json`` naming another URL and ``OPENAI_API_KEY`` sent
    the user's key there. When a key would be sent, ``-b`` and ``-k`` are given again (the line
    printed after Ctrl-C has them); the identity check has made sure they are the run's. ``-k``
    may be left out where the run's variable is the default one: ``-b URL`` alone sends that
    key to URL on any run."""
    if not key_sent(recorded) or (args.given("api_base_url") and not _names_key(recorded, args)):
        return
    raise CLIError(
        f"--resume {run} records the endpoint {recorded.base_url} with the key in "
        f"${recorded.api_key_var}; a run dir does not choose where a key is sent on its own. "
        f"To continue it there, name it again: {shlex.join(_restated(recorded))}"
    )


def _names_key(recorded: RunIdentity, args: EvalSettings | None = None) -> bool:
    """Whether the run's key variable must be typed again: not the default, and not given."""
    if args is not None and args.given("api_key_var"):
        return False
    return recorded.api_key_var != DEFAULT_KEY_VAR


def _restated(recorded: RunIdentity) -> list[str]:
    """The flags that name a run's endpoint and, where not the default, its key variable."""
    words = ["-b", str(recorded.base_url)]
    return words + (["-k", str(recorded.api_key_var)] if _names_key(recorded) else [])


def resume_line(env: str, run: str, identity: RunIdentity) -> str:
    """The command that continues ``run``: ``--resume`` and what a run dir does not restore on
    its own (the endpoint with its key variable, env args that unconfine or name endpoints)."""
    words = ["vf-eval", env, "--resume", run]
    if key_sent(identity):
        words += _restated(identity)
    unsafe = identity.env_args.get("sandbox_mode") == "unsafe"
    if unsafe or endpoint_env_args(identity.env_args):
        words += ["-a", json.dumps(identity.env_args)]
    return shlex.join(words)


def check_resume_matches(args: EvalSettings, previous: dict[str, Any], run: str) -> None:
    """A resumed run (``run``, the --resume directory) keeps its environment, model and rollouts
    per example: say which differs."""
    check_same_env(args, previous, "--resume", run)
    for flag, value, key in (
        ("-m/--model", args.model, "model"),
        (
            "-r/--rollouts-per-example",
            explicit(args, "rollouts_per_example"),
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


def restore_execution(
    args: EvalSettings, previous: dict[str, Any], run: str
) -> tuple[EvalSettings, dict[str, Any], list[str]]:
    """``--resume``'s execution settings (``ON_RESUME``): the run's, as metadata.json's
    ``execution`` recorded them when it last ran, except those given again on this command
    line (any of ``WORKERS`` given: none of the run's): the settings with them in place, those
    restored, and what to say, one line each: the restored settings that differ from this
    command's defaults, and those given now in place of the run's."""
    recorded = previous.get("execution")
    if not isinstance(recorded, dict):
        return args, {}, []  # a run from before they were recorded: this command line's
    fields = EvalSettings.model_fields
    names = [n for n, part in ON_RESUME.items() if part is OnResume.EXECUTION and n in recorded]
    workers_given = any(args.given(n) for n in WORKERS)
    restore = {
        n: recorded[n] for n in names if not args.given(n) and not (n in WORKERS and workers_given)
    }
    try:
        restored = args.with_values(restore)
    except ValidationError as exc:
        error = exc.errors()[0]
        raise CLIError(
            f"--resume {run}: its metadata.json records {error['loc'][0]}={error['input']!r} "
            f"({error['msg']}); give that flag on the command line"
        ) from exc
    if restored.max_concurrent < 1:
        raise CLIError(
            f"--resume {run}: its metadata.json records max_concurrent="
            f"{restored.max_concurrent}; give -c/--max-concurrent on the command line"
        )

    def shown(name: str, value: Any) -> str:
        return f"{flag_text(name, fields[name])}={default_text(value)}"

    said = []
    kept = [shown(n, v) for n, v in restore.items() if v != getattr(args, n)]
    if kept:
        said.append(f"--resume: as the run ran: {', '.join(kept)}")
    now = [
        f"{shown(n, getattr(args, n))} (the run had {default_text(recorded[n])})"
        for n in names
        if args.given(n) and getattr(args, n) != recorded[n]
    ]
    if now:
        said.append(f"--resume: given now in place of the run's: {', '.join(now)}")
    return restored, restore, said


def execution_record(args: EvalSettings, max_concurrent: int) -> dict[str, Any]:
    """metadata.json's ``execution``: this run's execution settings, as a resume restores them
    (``max_concurrent``: the one in effect, an environment's default included)."""
    record = {n: getattr(args, n) for n, part in ON_RESUME.items() if part is OnResume.EXECUTION}
    return {**record, "max_concurrent": max_concurrent}


def workers_setting(args: EvalSettings) -> Any:
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


def check_output_dirs(args: EvalSettings) -> None:
    """The directory this run writes into is the user's own (made now when missing): not a
    link, not another user's (one made first in a shared directory), not writable by anyone;
    the run dir ``--resume`` names, likewise (``verifiers.processes.own_dir``)."""
    from verifiers.processes.own_dir import foreign_dir_problem, own_dir

    if args.resume:
        if not os.path.lexists(args.resume):
            return  # said by the resume itself ("no metadata.json there")
        problem = foreign_dir_problem(Path(args.resume), "--resume run")
    elif args.no_save and not args.rescore:
        if args.traces:
            raise CLIError("--traces writes traces.jsonl beside results.jsonl: drop --no-save")
        return
    else:
        problem = own_dir(Path(args.output_dir), "--output-dir")
    if problem:
        raise CLIError(problem)
