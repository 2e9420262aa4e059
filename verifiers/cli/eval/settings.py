"""vf-eval: evaluate a model on an environment and save the results.

With no endpoint (-b or an --endpoints alias) it starts the built-in server with the embedded
SmolLM2-135M-Instruct (or -m PATH, a local Hugging Face model directory) and stops it afterwards.
Results stream to outputs/evals/<env>--<model>/<run>/ and a killed run continues with --resume.

Exit codes: 0 the run happened (errored rollouts are counted, not fatal), 1 every rollout failed
(the message names the first error), 2 it could not start (bad environment id, bad JSON, bad
-n/-r/-c, unreachable endpoint or a URL that is not an API root), 130 interrupted (resumable).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field

from verifiers.cli.endpoints import DEFAULT_KEY_VAR, DEFAULT_REGISTRY, Api
from verifiers.cli.eval.defaults import EvalDefaults
from verifiers.cli.settings import CommandSettings, Flag, parse_settings
from verifiers.local_model.models import DEFAULT_MODEL
from verifiers.workers.auth import DEFAULT_SECRET_FILE, SECRET_ENV

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
    traces: bool = Field(
        False,
        description="also write a classic environment's rollouts as v1 traces (traces.jsonl "
        "beside results.jsonl, one WireEpisode a line); a v1 taskset's run always writes them",
    )
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


class OnResume(StrEnum):
    """What ``vf-eval ENV --resume RUN`` does with a flag."""

    IDENTITY = "identity"  # decides the run's rows: restored; a different value is refused
    EXECUTION = "execution"  # how the run runs: restored unless given again (said in one line)
    INVOCATION = "invocation"  # this command's own: neither recorded nor restored


ON_RESUME: dict[str, OnResume] = {
    # the run's identity (verifiers.cli.run_identity): recorded at start, compared on resume
    "env": OnResume.IDENTITY,
    "env_args": OnResume.IDENTITY,
    "model": OnResume.IDENTITY,
    "api_base_url": OnResume.IDENTITY,
    "api_key_var": OnResume.IDENTITY,  # the variable's name; its value is never recorded
    "api": OnResume.IDENTITY,
    "num_examples": OnResume.IDENTITY,
    "rollouts_per_example": OnResume.IDENTITY,
    "max_tokens": OnResume.IDENTITY,  # a sampling arg
    "temperature": OnResume.IDENTITY,  # a sampling arg
    "sampling_args": OnResume.IDENTITY,
    "state_columns": OnResume.IDENTITY,  # the columns of every row
    "seed": OnResume.IDENTITY,
    "split": OnResume.IDENTITY,
    # how it runs: metadata.json's ``execution``, restored unless given again
    "max_concurrent": OnResume.EXECUTION,
    "group_timeout": OnResume.EXECUTION,
    "env_workers": OnResume.EXECUTION,
    "no_env_workers": OnResume.EXECUTION,
    "env_server": OnResume.EXECUTION,
    "env_secret_file": OnResume.EXECUTION,  # the file's path, never the secret
    # this command's own
    "header": OnResume.INVOCATION,  # may carry credentials: never recorded, pass it again
    "endpoints": OnResume.INVOCATION,  # the alias it resolved is recorded (model, URL, key var)
    "save_results": OnResume.INVOCATION,
    "no_save": OnResume.INVOCATION,  # a resumed run writes into its own directory
    "traces": OnResume.INVOCATION,  # written from results.jsonl, whole, after each run
    "resume": OnResume.INVOCATION,
    "rescore": OnResume.INVOCATION,
    "output_dir": OnResume.INVOCATION,  # a resumed run writes into its own directory
    "verbose": OnResume.INVOCATION,
}
"""Every vf-eval flag's part in ``--resume``, declared once (a test checks that each flag has
one). The identity is ``RunIdentity``; the execution settings are recorded as given to the run."""

WORKERS = ("env_workers", "no_env_workers", "env_server", "env_secret_file")
"""One choice (where the environment runs): any of them given on a resume's command line, none
of the run's is restored."""


def parse_args(argv: list[str] | None) -> EvalSettings:
    return parse_settings(EvalSettings, argv, "vf-eval", __doc__)


def explicit(args: EvalSettings, name: str) -> Any:
    """The value of a flag given on the command line, else None (a resumed run's, an
    environment's table or the built-in default applies)."""
    return getattr(args, name) if args.given(name) else None

