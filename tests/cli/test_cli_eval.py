"""vf-eval as users run it: flags, exit codes, saved files, endpoint aliases, resume after kills."""

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.eval_runs import answers_then_holds, interrupt_partway

from verifiers.cli.eval import main
from verifiers.results import read_rows
from verifiers.testing import Reply, last_user_text


def reverse_policy(request):
    return f"<answer>{last_user_text(request).split(': ', 1)[1][::-1]}</answer>"


def reverse_text_argv(base_url: str, output: Path, *flags: str) -> list[str]:
    """vf-eval's argv for reverse-text against ``base_url``, saving under ``output``."""
    return ["reverse-text", "-b", base_url, *flags, "--output-dir", str(output)]


def only_run_dir(output: Path) -> Path:
    runs = list((output / "evals").glob("*/*"))
    assert len(runs) == 1, runs
    return runs[0]


def test_with_b_and_no_m_the_model_is_the_one_the_server_lists(server, tmp_path):
    """It was sent as "default", which vf-serve and vLLM refuse (every rollout failed)."""
    from verifiers.cli.endpoints import CLIError, Endpoint
    from verifiers.cli.eval.checks import served_model

    server.set_handler(reverse_policy)
    assert main(reverse_text_argv(server.base_url, tmp_path, "-n", "1", "-r", "1")) == 0
    assert {request["model"] for request in server.requests} == {server.model_name}
    assert read_metadata(only_run_dir(tmp_path))["model"] == server.model_name
    endpoint = Endpoint("", server.base_url, None)
    for listed, needle in ((["a", "b"], "it serves a, b"), ([], "it lists no models")):
        with pytest.raises(CLIError, match=f"without -m: {needle}; name one with -m MODEL"):
            served_model(endpoint, listed)


def read_metadata(run: Path) -> dict:
    return json.loads((run / "metadata.json").read_text())


def test_eval_against_an_endpoint_saves_results_and_prints_a_summary(server, tmp_path, capsys):
    server.set_handler(reverse_policy)
    server.enqueue(Reply(status=400, error="bad request for one rollout"))
    code = main(
        [
            "reverse-text",
            "-b",
            server.base_url,
            "-m",
            "test-model",
            "-n",
            "3",
            "-r",
            "2",
            "-c",
            "4",
            "-t",
            "50",
            "-T",
            "0.5",
            "-S",
            '{"top_p": 0.9}',
            "--header",
            "X-Team: rl",
            "-C",
            "turn",
            "--output-dir",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr()
    assert code == 0  # an errored rollout is counted, not fatal
    run = only_run_dir(tmp_path)
    assert run.parent.name == "reverse-text--test-model"
    rows = list(read_rows(run / "results.jsonl"))
    assert len(rows) == 6 and all("turn" in r for r in rows)
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["status"] == "completed" and meta["summary"]["errors_by_type"] == {
        "BadRequestError": 1
    }
    assert meta["sampling_args"]["max_tokens"] == 50 and meta["sampling_args"]["temperature"] == 0.5
    request = server.requests[-1]
    assert request["top_p"] == 0.9 and request["max_completion_tokens"] == 50  # the classic rename
    assert (
        "reward (mean ± std)" in out.out and "BadRequestError: 1" in out.out and str(run) in out.out
    )


def test_package_eval_defaults_come_from_wheel_metadata(server, tmp_path):
    server.set_handler(reverse_policy)
    assert main(reverse_text_argv(server.base_url, tmp_path)) == 0
    meta = json.loads((only_run_dir(tmp_path) / "metadata.json").read_text())
    # reverse-text's pyproject: [tool.verifiers.eval] num_examples = 5, rollouts_per_example = 3, max_tokens = 128
    assert (
        meta["num_examples"],
        meta["rollouts_per_example"],
        meta["sampling_args"]["max_tokens"],
    ) == (5, 3, 128)


def test_endpoint_alias_from_toml_registry(server, tmp_path, monkeypatch):
    server.set_handler(reverse_policy)
    registry = tmp_path / "endpoints.toml"
    registry.write_text(
        f'[models.local]\nmodel = "aliased-model"\nurl = "{server.base_url}"\nkey = "VF_TEST_KEY"\n'
    )
    monkeypatch.setenv("VF_TEST_KEY", "secret")
    assert (
        main(
            [
                "reverse-text",
                "-m",
                "local",
                "--endpoints",
                str(registry),
                "-n",
                "1",
                "-r",
                "1",
                "--output-dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    assert server.requests[-1]["model"] == "aliased-model"
    assert only_run_dir(tmp_path).parent.name == "reverse-text--aliased-model"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["no-such-env", "-b", "{url}"], "no environment 'no-such-env' is installed"),
        (["reverse-text", "-a", "{{not json", "-b", "{url}"], "--env-args is not valid JSON"),
        (["reverse-text", "-a", "[1, 2]", "-b", "{url}"], "--env-args must be a JSON object"),
        (
            ["reverse-text", "-S", "temperature=1", "-b", "{url}"],
            "--sampling-args is not valid JSON",
        ),
        (["reverse-text", "-a", '{{"bogus": 1}}', "-b", "{url}"], "rejected arguments ['bogus']"),
        (
            ["reverse-text", "--header", "no-colon", "-b", "{url}"],
            "--header must look like 'Name: value'",
        ),
        (["reverse-text", "-b", "http://127.0.0.1:9/v1"], "cannot reach http://127.0.0.1:9/v1"),
        (
            ["reverse-text", "-m", "nope", "--endpoints", "/nonexistent.toml"],
            "endpoints file /nonexistent.toml does not exist",
        ),
        (["reverse-text", "--resume", "/nonexistent-run"], "no metadata.json there"),
        (["reverse-text", "-n", "0", "-b", "{url}"], "-n/--num-examples must be a positive number"),
        (
            ["reverse-text", "-r", "0", "-b", "{url}"],
            "-r/--rollouts-per-example must be a positive",
        ),
        (["reverse-text", "-b", "{root}"], "is not an OpenAI-compatible API root"),
    ],
)
def test_bad_input_exits_2_with_one_line_explanation(server, tmp_path, capsys, argv, message):
    argv = [a.format(url=server.base_url, root=server.base_url.removesuffix("/v1")) for a in argv]
    assert main([*argv, "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err.replace("\n", " ")
    assert not (tmp_path / "evals").exists()


def test_a_url_without_v1_gets_the_hint(server, tmp_path, capsys):
    root = server.base_url.removesuffix("/v1")
    assert main(["reverse-text", "-b", root, "--output-dir", str(tmp_path)]) == 2
    assert f"did you mean {root}/v1?" in capsys.readouterr().err.replace("\n", " ")


def test_a_run_where_every_rollout_failed_exits_1_and_says_why(server, tmp_path, capsys):
    server.set_handler(lambda request: Reply(status=404, error="model 'nope' does not exist"))
    code = main(reverse_text_argv(server.base_url, tmp_path, "-m", "nope", "-n", "2", "-r", "1"))
    err = capsys.readouterr().err.replace("\n", " ")
    assert code == 1 and "every rollout failed (2)" in err and "does not exist" in err


def test_metadata_records_the_seed_and_the_temperature_used(server, tmp_path):
    server.set_handler(reverse_policy)
    flags = ("-m", "m", "-n", "2", "-r", "1", "--seed", "7")
    assert main(reverse_text_argv(server.base_url, tmp_path, *flags)) == 0
    meta = json.loads((only_run_dir(tmp_path) / "metadata.json").read_text())
    assert meta["seed"] == 7 and meta["sampling_args"]["temperature"] == 1.0
    assert server.requests[-1]["temperature"] == 1.0


def test_verbose_shows_rollouts_not_transport_debug_lines(server, tmp_path):
    server.set_handler(reverse_policy)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "verifiers.cli.eval",
            "reverse-text",
            "-b",
            server.base_url,
            "-m",
            "m",
            "-n",
            "1",
            "-r",
            "1",
            "-v",
            "--output-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "httpcore" not in result.stderr and "httpx" not in result.stderr
    # the debug lines -v promises: the load, each model call (from the worker that made it),
    # each rollout's outcome
    assert "DEBUG verifiers.loading.loader: loaded reverse-text" in result.stderr
    assert "DEBUG verifiers.clients.http [worker " in result.stderr
    assert "POST " in result.stderr and "HTTP 200" in result.stderr
    assert "example 0 rollout 0: reward" in result.stderr
    assert result.stderr.startswith("loading reverse-text")  # says what it does from the start


def test_rejected_api_key_exits_2(tmp_path, capsys, monkeypatch):
    from verifiers.testing import ModelServer

    monkeypatch.setenv("VF_WRONG_KEY", "wrong")
    with ModelServer(api_key="right") as s:
        assert main(reverse_text_argv(s.base_url, tmp_path, "-k", "VF_WRONG_KEY")) == 2
    assert "rejected the API key in $VF_WRONG_KEY (HTTP 401)" in capsys.readouterr().err


def test_an_unset_key_variable_is_named_as_unset_not_wrong(tmp_path, capsys, monkeypatch):
    from verifiers.testing import ModelServer

    monkeypatch.delenv("VF_UNSET_KEY", raising=False)
    with ModelServer(api_key="right") as s:
        assert main(reverse_text_argv(s.base_url, tmp_path, "-k", "VF_UNSET_KEY")) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert "needs an API key (HTTP 401) and $VF_UNSET_KEY is not set" in err
    assert "rejected" not in err


def test_a_mistyped_alias_is_refused_before_any_server_starts(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    registry = tmp_path / "config" / "verifiers" / "endpoints.toml"
    registry.parent.mkdir(parents=True)
    registry.write_text(
        '[models.gpt-mini]\nmodel = "gpt-4.1-mini"\nurl = "http://127.0.0.1:9/v1"\n'
    )
    started = time.monotonic()
    assert main(["reverse-text", "-m", "gpt-mni", "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert f"-m gpt-mni: not an alias in {registry} (did you mean 'gpt-mini'?)" in err
    assert "starting the built-in model server" not in err and not (tmp_path / "logs").exists()
    assert time.monotonic() - started < 30  # no model was loaded


def test_the_summary_is_printed_once_and_no_results_line_without_saving(server, tmp_path, capsys):
    server.set_handler(reverse_policy)
    assert main(reverse_text_argv(server.base_url, tmp_path, "-n", "2", "-r", "1")) == 0
    out = capsys.readouterr().out
    assert out.count("reward (mean ± std)") == 1 and out.count("results: ") == 1
    assert (
        main(reverse_text_argv(server.base_url, tmp_path, "-n", "2", "-r", "1", "--no-save")) == 0
    )
    out = capsys.readouterr().out
    assert out.count("reward (mean ± std)") == 1
    assert "results:" not in out and "report:" not in out and "None" not in out


def test_a_first_prompt_over_the_context_length_is_an_error_not_a_stop(server, tmp_path, capsys):
    too_long = (
        "This model's maximum context length is 2048 tokens. However, you requested 5000 tokens."
    )
    server.set_handler(lambda req: Reply(status=400, error=too_long))
    assert main(reverse_text_argv(server.base_url, tmp_path, "-n", "2", "-r", "1")) == 1
    captured = capsys.readouterr()
    assert "every rollout failed (2); the first: PromptTooLongError" in captured.err.replace(
        "\n", " "
    )
    meta = json.loads((only_run_dir(tmp_path) / "metadata.json").read_text())
    assert meta["summary"]["errors_by_type"] == {"PromptTooLongError": 2}
    rows = list(read_rows(only_run_dir(tmp_path) / "results.jsonl"))
    assert all(r["stop_condition"] == "has_error" and r["is_truncated"] for r in rows)


@pytest.mark.parametrize(
    "sig, where",
    [
        (signal.SIGINT, "env workers"),
        (signal.SIGTERM, "env workers"),
        (signal.SIGKILL, "env workers"),
        (signal.SIGINT, "in process"),
        (signal.SIGTERM, "in process"),
    ],
    ids=["SIGINT", "SIGTERM", "SIGKILL", "SIGINT-in-process", "SIGTERM-in-process"],
)
def test_killed_vf_eval_resumes_without_duplicates(server, tmp_path, sig, where, monkeypatch):
    """The run is a --split train run against -b URL -k VAR with a seed, its environment in
    worker processes (the default) or in vf-eval's own (--no-env-workers): the printed line
    alone (``vf-eval ENV --resume RUN``) continues exactly it, where it ran, and its rows and
    metadata equal an uninterrupted run's. A key is sent, so the line names the endpoint and
    the key's variable again (a run dir alone pairs no endpoint with a key)."""
    monkeypatch.setenv("VF_TEST_KEY", "k")
    server.set_handler(answers_then_holds(reverse_policy, 20))  # 10 groups, then it waits
    identity = ("-b", server.base_url, "-k", "VF_TEST_KEY", "--split", "train", "--seed", "3")
    in_process = ("--no-env-workers",) if where == "in process" else ()
    sizes = ("-n", "30", "-r", "2", "-c", "2", *in_process)
    cmd = [sys.executable, "-m", "verifiers.cli.eval", "reverse-text", *identity, *sizes]
    proc, err, run = interrupt_partway(cmd, tmp_path / "cut", 10, sig)
    printed = f"vf-eval reverse-text --resume {run} -b {server.base_url} -k VF_TEST_KEY"
    assert "Ctrl-C or SIGTERM stops the run with its finished rollouts saved" in err  # said first
    if sig != signal.SIGKILL:
        # the hint is one line to copy, however long the path
        assert proc.returncode == 130 and f"  {printed}" in err.splitlines()
    else:
        assert proc.returncode == -9
    done_before = len(list(read_rows(run / "results.jsonl")))
    assert done_before < 60
    server.set_handler(reverse_policy)
    resumed = subprocess.run(
        [sys.executable, "-m", "verifiers.cli.eval", *printed.split()[1:]],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "VF_TEST_KEY": "k"},
    )
    assert resumed.returncode == 0, resumed.stderr
    rows = list(read_rows(run / "results.jsonl"))
    keys = [(r["example_id"], r["rollout_index"]) for r in rows]
    assert len(keys) == len(set(keys)) == 60
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["status"] == "completed" and meta["resumed"] == 1 and meta["num_examples"] == 30
    whole = subprocess.run(
        [*cmd, "--output-dir", str(tmp_path / "whole")], capture_output=True, text=True, timeout=120
    )
    assert whole.returncode == 0, whole.stderr
    (whole_run,) = (tmp_path / "whole" / "evals").glob("*/*/results.jsonl")

    def rows_of(path):
        return sorted(
            (r["example_id"], r["rollout_index"], json.dumps(r["prompt"]), r["answer"], r["reward"])
            for r in read_rows(path)
        )

    assert rows_of(run / "results.jsonl") == rows_of(whole_run)
    whole_meta = json.loads((whole_run.parent / "metadata.json").read_text())
    for key in ("split", "seed", "identity", "sampling_args", "base_url", "model"):
        assert meta[key] == whole_meta[key], key
    assert meta["split"] == "train" and meta["identity"]["api_key_var"] == "VF_TEST_KEY"
    assert meta["execution"]["no_env_workers"] is bool(in_process)  # resumed where it ran
    assert (meta.get("env_workers") is None) is bool(in_process)


@pytest.fixture(scope="module")
def local_vf_serve(tiny_dir: Path, tmp_path_factory):
    """A vf-serve on this machine (a tiny random Llama, served as "tiny"), as a user starts one."""
    pytest.importorskip("torch", reason="vf-serve needs the local extra (torch, transformers)")
    from verifiers.processes.server import start_server

    log = tmp_path_factory.mktemp("vf-serve") / "serve.log"
    with start_server(
        str(tiny_dir), log_path=log, extra_args=["--served-model-name", "tiny"]
    ) as served:
        yield served


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_run_against_a_local_vf_serve_resumes_against_it(local_vf_serve, tmp_path, sig):
    """A resumed run against a local vf-serve quietly started the built-in server instead: the
    printed line alone goes on against the same server and model, and greedy rows (reward
    included) equal an uninterrupted run's."""
    base = ("-b", local_vf_serve.base_url, "-T", "0", "-t", "48")
    sizes = ("-n", "16", "-r", "2", "-c", "2")
    cmd = [sys.executable, "-m", "verifiers.cli.eval", "reverse-text", *base, *sizes]
    proc, err, run = interrupt_partway(cmd, tmp_path / "cut", 4, sig)
    printed = f"vf-eval reverse-text --resume {run}"
    assert proc.returncode == 130 and f"  {printed}" in err.splitlines(), err
    assert len(list(read_rows(run / "results.jsonl"))) < 32
    resumed = subprocess.run(
        [sys.executable, "-m", "verifiers.cli.eval", *printed.split()[1:]],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    whole = subprocess.run(
        [*cmd, "--output-dir", str(tmp_path / "whole")], capture_output=True, text=True, timeout=300
    )
    assert whole.returncode == 0, whole.stderr
    (whole_run,) = (tmp_path / "whole" / "evals").glob("*/*")

    def rows_of(path: Path) -> list[tuple]:
        return sorted(
            (r["example_id"], r["rollout_index"], json.dumps(r["prompt"]), r["answer"], r["reward"])
            for r in read_rows(path / "results.jsonl")
        )

    assert len(rows_of(run)) == 32 and rows_of(run) == rows_of(whole_run)
    meta = json.loads((run / "metadata.json").read_text())
    whole_meta = json.loads((whole_run / "metadata.json").read_text())
    assert meta["base_url"] == local_vf_serve.base_url and meta["model"] == "tiny"
    for key in ("split", "identity", "sampling_args", "base_url", "model"):
        assert meta[key] == whole_meta[key], key


def test_resume_refuses_a_mismatch_before_doing_anything(server, tmp_path, capsys):
    server.set_handler(reverse_policy)
    flags = ("-m", "m", "-n", "1", "-r", "1")
    assert main(reverse_text_argv(server.base_url, tmp_path, *flags)) == 0
    run = only_run_dir(tmp_path)
    requests = len(server.requests)
    assert main(["gsm8k-mini", "--resume", str(run)]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert "is a run of reverse-text, not gsm8k-mini" in err and "rejected arguments" not in err
    assert main(["reverse-text", "--resume", str(run), "-r", "3"]) == 2
    assert "-r/--rollouts-per-example: the run has 1, not 3" in capsys.readouterr().err.replace(
        "\n", " "
    )
    changed = ["--split", "train", "-T", "0.5", "-k", "OTHER_KEY", "--seed", "9", "-b", "http://x"]
    assert main(["reverse-text", "--resume", str(run), *changed]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    for named in ("--split: the run has 'eval', not 'train'", "{'temperature': 1.0}", "--seed:"):
        assert named in err, err
    assert "-k/--api-key-var" in err and "-b/--api-base-url" in err
    assert main(["reverse-text@9.9", "--resume", str(run), "-C", "turn"]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert "ENV: the run has 'reverse-text', not 'reverse-text@9.9'" in err, err
    assert "-C/--state-columns: the run has None, not ['turn']" in err, err
    assert main(["reverse-text", "--resume", str(run), "--split", "eval", "-n", "1"]) == 0
    assert len(server.requests) == requests  # nothing was sent: the run was complete


def test_a_run_dir_does_not_turn_the_sandbox_off_on_resume_or_rescore(server, tmp_path, capsys):
    """An outside attack edited a run dir's identity to ``sandbox_mode: unsafe`` and the resume
    ran the model's tool call unconfined: a restored unsafe mode is refused until typed again."""
    server.set_handler(reverse_policy)
    assert main(reverse_text_argv(server.base_url, tmp_path, "-m", "m", "-n", "1", "-r", "1")) == 0
    run = only_run_dir(tmp_path)
    metadata = json.loads((run / "metadata.json").read_text())
    metadata["identity"]["env_args"] = {"sandbox_mode": "unsafe"}
    metadata["env_args"] = {"sandbox_mode": "unsafe"}
    (run / "metadata.json").write_text(json.dumps(metadata))
    requests = len(server.requests)
    for flag in ("--resume", "--rescore"):
        assert main(["reverse-text", flag, str(run)]) == 2
        err = capsys.readouterr().err.replace("\n", " ")
        assert f"{flag} {run} records the env arg sandbox_mode 'unsafe'" in err, err
    # typed again, it gets past the check (and reverse-text itself takes no such argument)
    typed = ["-a", '{"sandbox_mode": "unsafe"}']
    assert main(["reverse-text", "--resume", str(run), *typed]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert "records the env arg" not in err and "sandbox_mode" in err, err
    assert len(server.requests) == requests


class InFlight:
    """A model server handler that answers after ``seconds`` and counts the requests it holds
    at once (``peak``); with ``hang_first``, the first request gets its answer after a minute
    (not counted)."""

    def __init__(self, seconds: float, hang_first: bool = False) -> None:
        self.seconds, self.hang_first, self.now, self.peak = seconds, hang_first, 0, 0

    async def __call__(self, request):
        if self.hang_first:
            self.hang_first = False
            return Reply(content="late", delay=60)
        self.now += 1
        self.peak = max(self.peak, self.now)
        try:
            await asyncio.sleep(self.seconds)
        finally:
            self.now -= 1
        return reverse_policy(request)


@pytest.mark.slow
def test_resume_restores_how_the_run_ran_and_a_flag_given_again_wins(server, tmp_path):
    """-c and --group-timeout chosen at start are in effect when the printed line alone
    resumes the run (they were not restored: -c 32 and no time limit); -c given on the resume
    wins and is said in one line."""
    server.set_handler(InFlight(0.2))
    flags = ("-n", "40", "-r", "1", "-c", "2", "--group-timeout", "3", "--env-workers", "1")
    cmd = [sys.executable, "-m", "verifiers.cli.eval", "reverse-text", "-b", server.base_url]
    proc, err, run = interrupt_partway([*cmd, *flags], tmp_path / "cut", 6)
    assert proc.returncode == 130, err
    printed = next(line.strip() for line in err.splitlines() if "--resume" in line)
    assert printed == f"vf-eval reverse-text --resume {run}"
    copy = tmp_path / "copy" / run.name
    shutil.copytree(run, copy)

    def resume(run_dir: Path, *given: str) -> subprocess.CompletedProcess:
        argv = [*printed.split()[1:-1], str(run_dir), *given]
        return subprocess.run(
            [sys.executable, "-m", "verifiers.cli.eval", *argv],
            capture_output=True,
            text=True,
            timeout=50,  # under the hung reply's minute: no group timeout fails here
        )

    restored = InFlight(0.2, hang_first=True)
    server.set_handler(restored)
    done = resume(run)
    assert done.returncode == 0, done.stderr
    assert "--resume: as the run ran: -c/--max-concurrent=2, --group-timeout=3.0" in done.stderr
    assert restored.peak == 2  # -c 2 as at start, not the default 32
    rows = list(read_rows(run / "results.jsonl"))
    assert sorted(r["example_id"] for r in rows) == list(range(40))
    errors = [r["error"]["message"] for r in rows if r.get("error")]
    assert len(errors) == 1 and "did not finish within its 3s timeout" in errors[0], errors
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["max_concurrent"] == 2 and meta["resumed"] == 1
    assert meta["execution"]["group_timeout"] == 3.0
    assert meta["execution"]["env_workers"] == "1"

    overridden = InFlight(0.2)
    server.set_handler(overridden)
    done = resume(copy, "-c", "5")
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith("--resume:")]
    assert said == [
        "--resume: as the run ran: --group-timeout=3.0, --env-workers=1",
        "--resume: given now in place of the run's: -c/--max-concurrent=5 (the run had 2)",
    ], done.stderr
    assert 2 < overridden.peak <= 5
    meta = json.loads((copy / "metadata.json").read_text())
    assert meta["execution"]["max_concurrent"] == meta["max_concurrent"] == 5
    assert meta["execution"]["group_timeout"] == 3.0
    assert len(list(read_rows(copy / "results.jsonl"))) == 40


@pytest.mark.parametrize("api", ["chat", "completions", "responses", "anthropic"])
def test_eval_targets_each_model_api(api, server, tmp_path, monkeypatch):
    monkeypatch.setenv("VF_TEST_KEY", "k")
    server.set_handler(reverse_policy)
    code = main(
        reverse_text_argv(
            server.base_url, tmp_path, "--api", api, "-k", "VF_TEST_KEY", "-n", "2", "-r", "1"
        )
    )
    assert code == 0
    rows = list(read_rows(only_run_dir(tmp_path) / "results.jsonl"))
    assert len(rows) == 2 and all(r["reward"] > 0.9 for r in rows), rows
    field = {
        "chat": "messages",
        "completions": "prompt",
        "responses": "input",
        "anthropic": "messages",
    }
    assert server.requests and all(field[api] in r for r in server.requests)
    if api == "anthropic":
        assert all(r.get("_api") == "messages" for r in server.requests)


def test_an_endpoints_alias_may_name_its_api(server, tmp_path, monkeypatch):
    monkeypatch.setenv("VF_TEST_KEY", "k")
    server.set_handler(reverse_policy)
    registry = tmp_path / "endpoints.toml"
    registry.write_text(
        f'[models.claude]\nmodel = "c"\nurl = "{server.base_url}"\nkey = "VF_TEST_KEY"\napi = "anthropic"\n'
    )
    code = main(
        [
            "reverse-text",
            "-m",
            "claude",
            "--endpoints",
            str(registry),
            "-n",
            "1",
            "-r",
            "1",
            "--output-dir",
            str(tmp_path),
        ]
    )
    assert code == 0 and server.requests[0]["_api"] == "messages"


@pytest.mark.slow
def test_a_local_checkpoint_is_filed_by_name_and_content_hash(tiny_dir, tmp_path):
    """Two checkpoints both called ``weights`` are two models: each run records the path and
    the sha256 of the files it evaluated, and is filed under <name>-<hash>."""
    import shutil

    from verifiers.local_model.models import model_dir_sha256

    request_dir = tmp_path / "rl-run" / "step_2" / "weights"
    shutil.copytree(tiny_dir, request_dir)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "verifiers.cli.eval",
            "reverse-text",
            "-m",
            str(request_dir),
            "-n",
            "1",
            "-r",
            "1",
            "-t",
            "4",
            "--output-dir",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    digest = model_dir_sha256(request_dir)
    run = only_run_dir(tmp_path / "out")
    assert run.parent.name == f"reverse-text--weights-{digest[:8]}"
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["model_path"] == str(request_dir.resolve()) and meta["model_sha256"] == digest


RESCORE_ENV = """
import os
import verifiers as vf


def exact(completion, answer) -> float:
    return float(completion[-1]["content"] == answer) * float(os.environ.get("VF_TEST_SCALE", "1"))


def turns_seen(state) -> float:
    return float(len(state["trajectory"]))


def load_environment():
    rows = [{"question": f"q{i}", "answer": f"q{i}" if i % 2 else "other"} for i in range(4)]
    return vf.SingleTurnEnv(dataset=rows, rubric=vf.Rubric(funcs=[exact, turns_seen], weights=[1.0, 0.0]))
"""


def test_rescore_scores_recorded_rollouts_again_without_the_model(
    server, tmp_path, capsys, monkeypatch
):
    source = tmp_path / "src"
    source.mkdir()
    (source / "vf_rescore_probe.py").write_text(RESCORE_ENV)
    monkeypatch.syspath_prepend(str(source))
    monkeypatch.setenv("PYTHONPATH", str(source))
    server.set_handler(lambda req: last_user_text(req))  # echoes: odd examples are right
    out_dir = tmp_path / "out"
    argv = ["vf-rescore-probe", "-b", server.base_url, "-m", "m", "-n", "4", "-r", "2"]
    assert main([*argv, "--output-dir", str(out_dir)]) == 0
    source_run = only_run_dir(out_dir)
    requests = len(server.requests)
    capsys.readouterr()

    # the rubric changed (rewards doubled): re-score what was recorded
    monkeypatch.setenv("VF_TEST_SCALE", "2")
    assert (
        main(["vf-rescore-probe", "--rescore", str(source_run), "--output-dir", str(out_dir)]) == 0
    )
    assert len(server.requests) == requests  # no model call
    printed = capsys.readouterr().out
    assert "re-scored 8 rollouts: reward changed on 4" in printed
    assert "0.5000" in printed and "1.0000" in printed  # recorded mean, mean now
    runs = sorted((out_dir / "evals" / "vf-rescore-probe--m").iterdir())
    new_run = next(r for r in runs if r != source_run)
    meta = json.loads((new_run / "metadata.json").read_text())
    assert meta["rescored_from"] == str(source_run) and meta["status"] == "completed"
    assert (new_run / "report.html").is_file() and f"report: {new_run}" in printed
    old_rows = {
        (r["example_id"], r["rollout_index"]): r for r in read_rows(source_run / "results.jsonl")
    }
    new_rows = list(read_rows(new_run / "results.jsonl"))
    assert len(new_rows) == 8
    for row in new_rows:
        old = old_rows[(row["example_id"], row["rollout_index"])]
        assert row["completion"] == old["completion"] and row["reward"] == 2 * old["reward"]
        assert row["metrics"]["turns_seen"] == 1.0  # the trajectory was rebuilt from the record

    # a run of another environment is refused, saying which it is
    assert main(["reverse-text", "--rescore", str(source_run)]) == 2
    assert "is a run of vf-rescore-probe, not reverse-text" in capsys.readouterr().err.replace(
        "\n", " "
    )


def _installed_distribution(root: Path, name: str, table: str) -> None:
    """A distribution as importlib.metadata finds it installed: a dist-info with the shipped
    pyproject.toml where environment wheels carry it."""
    info = root / f"{name.replace('-', '_')}-0.1.0.dist-info"
    (info / "extra_metadata").mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    (info / "extra_metadata" / "pyproject.toml").write_text(
        f'[project]\nname = "{name}"\n\n[tool.verifiers.eval]\n{table}\n'
    )


def test_eval_table_typo_is_an_error_naming_the_key(tmp_path, monkeypatch):
    from verifiers.cli.endpoints import CLIError
    from verifiers.cli.eval.defaults import eval_defaults

    monkeypatch.syspath_prepend(str(tmp_path))
    _installed_distribution(tmp_path, "typo-env", "num_example = 4\nmax_tokens = 64")
    with pytest.raises(
        CLIError, match=r"typo-env's \[tool.verifiers.eval\] table: unknown key 'num_example'"
    ):
        eval_defaults("typo-env")
    _installed_distribution(tmp_path, "wrong-type-env", 'rollouts_per_example = "4"')
    with pytest.raises(CLIError, match=r"rollouts_per_example: .*got '4'"):
        eval_defaults("wrong-type-env")
    # the table that is right still sets what it names; an integer temperature reads as TOML's 1.0
    _installed_distribution(tmp_path, "good-env", "num_examples = 7\ntemperature = 1")
    good = eval_defaults("good-env")
    assert (good.num_examples, good.rollouts_per_example, good.temperature) == (7, 3, 1.0)


def test_an_endpoints_file_in_the_working_directory_never_chooses_where_a_key_goes(
    server, tmp_path, capsys, monkeypatch
):
    """A pulled environment's endpoints.toml: its alias would have sent $OPENAI_API_KEY to its
    URL, and an alias named as the embedded model would have replaced it."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no registry of the user's
    monkeypatch.setenv("OPENAI_API_KEY", "the-users-key")
    monkeypatch.chdir(tmp_path)
    Path("endpoints.toml").write_text(
        f'[models.mini]\nmodel = "m"\nurl = "{server.base_url}"\nkey = "OPENAI_API_KEY"\n'
    )
    server.set_handler(reverse_policy)
    assert main(["reverse-text", "-m", "mini", "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert "./endpoints.toml is not read unless named" in err and not server.requests
    named = ["reverse-text", "-m", "mini", "-n", "1", "-r", "1", "--endpoints", "endpoints.toml"]
    assert main([*named, "--output-dir", str(tmp_path)]) == 0  # named: the user chose it
    assert server.requests
    Path("endpoints.toml").write_text(
        f'[models.SmolLM2-135M-Instruct]\nmodel = "m"\nurl = "{server.base_url}"\n'
    )
    taken = ["reverse-text", "-m", "SmolLM2-135M-Instruct", "--endpoints", "endpoints.toml"]
    assert main(taken) == 2
    assert "is the embedded model's name" in capsys.readouterr().err.replace("\n", " ")


def test_verbose_says_how_long_the_first_rollout_took(server, tmp_path, capsys):
    """What a short run's user waits through: workers starting, the endpoint checked."""
    server.set_handler(reverse_policy)
    assert main(reverse_text_argv(server.base_url, tmp_path, "-n", "2", "-r", "1", "-v")) == 0
    err = capsys.readouterr().err
    assert re.search(r"first rollout finished \d+\.\d\d s after start", err), err[-2000:]


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a directory as another user (uid 65534)")
def test_an_output_dir_that_is_not_the_users_own_is_refused(server, tmp_path, capsys):
    """Outside attack pass 4: in a shared sticky directory another user planted ``outputs`` as a
    link (vf-eval wrote its run through it) and an ``--output-dir`` of their own, mode 0777 (it
    was written into). Each is refused before anything runs; the user's own dir then works."""
    import shutil
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="vf-shared-", dir="/tmp"))
    shared.chmod(0o1777)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    try:
        subprocess.run(
            ["sh", "-c", f"cd {shared} && ln -s {elsewhere} outputs && mkdir -m 777 theirs"],
            check=True,
            user=65534,
            group=65534,
        )
        server.set_handler(reverse_policy)
        for out, says in (
            (shared / "outputs", "not a directory of its own"),
            (shared / "theirs", "belongs to uid 65534"),
        ):
            assert main(reverse_text_argv(server.base_url, out)) == 2
            assert says in capsys.readouterr().err
        assert list(elsewhere.iterdir()) == [] and list((shared / "theirs").iterdir()) == []
        mine = tmp_path / "mine"
        mine.mkdir(mode=0o777)
        mine.chmod(0o777)
        assert main(reverse_text_argv(server.base_url, mine)) == 2
        assert "may be changed by anyone" in capsys.readouterr().err
        mine.chmod(0o755)
        assert main(reverse_text_argv(server.base_url, mine)) == 0
        assert only_run_dir(mine).is_dir()
    finally:
        shutil.rmtree(shared, ignore_errors=True)
