"""What vf-eval trusts, through the real command: which key variables a vf-env-server reads for
it, and which ids it imports before the classic loader's owner and version checks (SECURITY.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from verifiers.cli.eval import main
from verifiers.processes.server import free_port
from verifiers.testing import ModelServer, Reply, last_user_text
from verifiers.testing.commands import cli

SECRET = "s3cret-shared-by-both-sides"
ALLOWED_KEY = "sk-allowed-key-of-the-server-host"
OTHER_SECRET = "another-secret-of-the-server-host"


def reverse_policy(request: dict) -> str:
    return f"<answer>{last_user_text(request).split(': ', 1)[1][::-1]}</answer>"


def run_rows(output: Path) -> list[dict]:
    (results,) = (output / "evals").glob("*/*/results.jsonl")
    return [json.loads(line) for line in results.read_text().splitlines()]


def test_an_env_server_reads_only_the_key_variables_it_allows(tmp_path, capsys, monkeypatch):
    """``-k NAME`` names the variable a vf-env-server reads the model key from on its own host.
    A variable it was started with (``--key-var``) works: the key reaches the endpoint. Another
    variable of that host (a different secret) is refused with the reason, and no request
    carrying it reaches the endpoint the caller named."""
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET)
    secret_file.chmod(0o600)
    port = free_port()
    env = {**os.environ, "VF_TEST_ALLOWED_KEY": ALLOWED_KEY, "VF_TEST_OTHER_SECRET": OTHER_SECRET}
    hosted = subprocess.Popen(
        [
            *(sys.executable, "-m", "verifiers.cli.env_server", "reverse-text"),
            *("--port", str(port), "--workers", "1", "--secret-file", str(secret_file)),
            *("--key-var", "VF_TEST_ALLOWED_KEY"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert hosted.stdout is not None and "vf-env-server:" in hosted.stdout.readline()
        remote = ["--env-server", f"127.0.0.1:{port}", "--env-secret-file", str(secret_file)]
        with ModelServer(reverse_policy, api_key=ALLOWED_KEY) as keyed:
            monkeypatch.setenv("VF_TEST_ALLOWED_KEY", ALLOWED_KEY)  # vf-eval's own check of -b
            allowed = ["reverse-text", "-b", keyed.base_url, "-n", "2", "-r", "1", *remote]
            out = tmp_path / "allowed"
            assert main([*allowed, "-k", "VF_TEST_ALLOWED_KEY", "--output-dir", str(out)]) == 0
            assert len(keyed.requests) == 2  # answered: the key was read and sent
            assert all(row["reward"] > 1 and not row.get("error") for row in run_rows(out))
        with ModelServer(reverse_policy) as theirs:  # an endpoint the caller chose, no key asked
            monkeypatch.setenv("VF_TEST_OTHER_SECRET", "the-callers-own-value")
            refused = ["reverse-text", "-b", theirs.base_url, "-n", "2", "-r", "1", *remote]
            out = tmp_path / "refused"
            main([*refused, "-k", "VF_TEST_OTHER_SECRET", "--output-dir", str(out)])
            reason = (
                "this env server does not read VF_TEST_OTHER_SECRET (it reads "
                "VF_TEST_ALLOWED_KEY; start it with --key-var NAME to allow another)"
            )
            said = capsys.readouterr().err.replace("\n", " ") + json.dumps(run_rows(out))
            assert reason in said
            assert theirs.requests == []  # no model call: the other secret was never sent
    finally:
        hosted.terminate()
        hosted.wait(30)


SIDE_EFFECT_MODULE = '''
"""Imported, it says so in a file: the test sees whether vf-eval ran any of its code."""
import os
from pathlib import Path

with Path(os.environ["VF_TEST_IMPORT_LOG"]).open("a") as log:
    log.write(f"imported in {os.getpid()}\\n")

import verifiers.v1  # as a v1 taskset package does: what vf-eval's v1 probe looks for
import verifiers as vf
from datasets import Dataset


def load_environment(**kwargs):
    rows = [{"question": "say ok", "answer": "ok"}]
    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=vf.Rubric())
'''


def install_side_effect_package(site: Path) -> None:
    """``sidefx-env`` 1.0.0, installed into ``site`` as an installer leaves a wheel (its module
    and a dist-info naming it), from no hub owner."""
    (site / "sidefx_env").mkdir(parents=True)
    (site / "sidefx_env" / "__init__.py").write_text(SIDE_EFFECT_MODULE)
    info = site / "sidefx_env-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sidefx-env\nVersion: 1.0.0\n")
    (info / "top_level.txt").write_text("sidefx_env\n")
    (info / "RECORD").write_text("sidefx_env/__init__.py,,\n")


def test_an_owner_or_version_id_is_checked_before_any_code_of_the_package_runs(server, tmp_path):
    """``vf-eval OWNER/NAME`` and ``NAME@VERSION``: the v1 taskset probe used to import the
    package before the classic loader's owner and version checks. An id naming an owner it
    was not installed from, or a version that is not installed, is refused with the reason and
    none of the package's code runs; the plain name then imports and runs it."""
    site = tmp_path / "site"
    install_side_effect_package(site)
    log = tmp_path / "imports.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "VF_TEST_IMPORT_LOG": str(log),
    }

    def vf_eval(env_id: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                *(cli("vf-eval"), env_id, "-b", server.base_url, "-n", "1", "-r", "1"),
                *("--no-env-workers", "--output-dir", str(tmp_path / "out")),
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )

    for env_id, says in (
        ("someone/sidefx-env", "installed here, but not from a hub owner"),
        # no owner to install from: the hint says how to remove the local install first
        ("sidefx-env@9.9.9", "is a local install (vf-install or pip), with no hub owner"),
        ("someone/sidefx-env@1.0.0", "installed here, but not from a hub owner"),
    ):
        done = vf_eval(env_id)
        assert done.returncode != 0, done.stdout
        assert says in done.stderr.replace("\n", " "), done.stderr[-2000:]
        assert not log.exists(), f"{env_id}: {log.read_text()}"
    server.set_handler(lambda request: "ok")
    done = vf_eval("sidefx-env@1.0.0")  # the version installed: loaded, its code runs
    assert done.returncode == 0, done.stderr[-2000:]
    assert log.read_text().startswith("imported in ")


# What a hostile endpoint can send vf-eval's terminal: an OSC 52 sets the clipboard (a command to
# paste), an OSC 8 plants a hyperlink, an OSC 0 retitles the window; ``[/bold]`` in a model id
# crashed vf-eval (Rich's MarkupError) after its run dir was made.
CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZAo=\x1b\\"
LINK = "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"
TITLE = "\x1b]0;OWNED\x07"


def one_rollout(server: ModelServer, output: Path) -> list[str]:
    """vf-eval's argv for one reverse-text rollout against ``server``, saved under ``output``."""
    flags = ["-n", "1", "-r", "1", "--output-dir", str(output)]
    return [cli("vf-eval"), "reverse-text", "-b", server.base_url, *flags]


def test_a_hostile_endpoint_reaches_the_terminal_only_as_text(tmp_path):
    """The model id an endpoint lists, the completions it sends (shown by ``-v``) and its error
    messages (said at the end, and logged by ``-v``) are printed without their terminal sequences and as text, never as Rich markup;
    the run itself is unchanged: the completion is saved as the model wrote it."""
    hostile_id = f"[/bold]{TITLE}m"
    with ModelServer(model_name=hostile_id) as server:
        server.set_handler(lambda request: f"{CLIPBOARD}{LINK}<answer>x</answer>")
        ran = subprocess.run(
            [*one_rollout(server, tmp_path / "ok"), "-v"],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        out = ran.stdout + ran.stderr
        assert "\x1b]" not in out and "\x07" not in out, repr(out[-2000:])
        assert "· [/bold]m" in out and "click<answer>x</answer>" in out  # said, as text
        (row,) = run_rows(tmp_path / "ok")
        assert row["completion"][-1]["content"] == f"{CLIPBOARD}{LINK}<answer>x</answer>"

        server.set_handler(lambda request: Reply(status=400, error=f"bad {CLIPBOARD}[/red] x"))
        failed = subprocess.run(
            [*one_rollout(server, tmp_path / "failed"), "-v"],  # -v: the error is logged too
            capture_output=True,
            text=True,
            timeout=180,
        )
    out = failed.stdout + failed.stderr
    assert failed.returncode == 1, out  # every rollout failed: said, with the endpoint's words
    assert "\x1b]" not in out and "bad [/red] x" in out, repr(out[-2000:])


class KeyCatcher:
    """An endpoint someone else runs on loopback: it records the ``Authorization`` header of
    every request it gets (a model list with one model, so a client goes on to use it)."""

    def __init__(self) -> None:
        import http.server
        import threading

        self.caught: list[str | None] = []
        caught = self.caught

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                caught.append(self.headers.get("Authorization"))
                body = json.dumps({"data": [{"id": "m"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_run_dir_does_not_send_a_key_to_an_endpoint_it_names(
    server, tmp_path, capsys, monkeypatch
):
    """An outside attack edited a run dir's ``metadata.json`` to name its own URL beside the
    run's key variable, and ``vf-eval ENV --resume RUN`` sent the user's key there (its first
    request, the model list, carried it); env args naming a judge's URL and key variable did the
    same on --resume and --rescore. Now a run dir pairs no endpoint with a key on its own word:
    the resume names ``-b`` and ``-k`` again (as the line printed after Ctrl-C does), and such
    env args are typed again, else it is refused before any request; restated, it runs."""
    monkeypatch.setenv("VF_TEST_KEY", "sk-the-users-own-key")
    server.set_handler(reverse_policy)
    argv = ["reverse-text", "-b", server.base_url, "-k", "VF_TEST_KEY", "-m", "m"]
    sizes = ["-n", "2", "-r", "1", "--no-env-workers"]
    assert main([*argv, *sizes, "--output-dir", str(tmp_path / "out")]) == 0
    (run,) = (tmp_path / "out" / "evals").glob("*/*")
    metadata = (run / "metadata.json").read_text()
    catcher = KeyCatcher()
    try:
        edited = json.loads(metadata)
        edited["identity"]["base_url"] = edited["base_url"] = catcher.base_url
        (run / "metadata.json").write_text(json.dumps(edited))
        capsys.readouterr()
        assert main(["reverse-text", "--resume", str(run)]) == 2
        err = capsys.readouterr().err.replace("\n", " ")
        assert (
            f"records the endpoint {catcher.base_url} with the key in $VF_TEST_KEY; a run dir "
            "does not choose where a key is sent on its own" in err
        ), err
        assert f"-b {catcher.base_url} -k VF_TEST_KEY" in err
        # the default variable: naming the endpoint is enough (``-b URL`` sends that key anyway)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-the-users-default-key")
        edited["identity"]["api_key_var"] = edited["api_key_var"] = "OPENAI_API_KEY"
        (run / "metadata.json").write_text(json.dumps(edited))
        assert main(["reverse-text", "--resume", str(run)]) == 2
        err = capsys.readouterr().err.replace("\n", " ")
        assert err.rstrip().endswith(f"name it again: -b {catcher.base_url}"), err
        # the judge's endpoint in the env args, on --resume and --rescore (which runs a judge)
        edited = json.loads(metadata)
        judge = {"judge_base_url": catcher.base_url, "judge_api_key_var": "VF_TEST_KEY"}
        edited["identity"]["env_args"] = edited["env_args"] = judge
        (run / "metadata.json").write_text(json.dumps(edited))
        for flag in ("--resume", "--rescore"):
            restated = ["-b", server.base_url, "-k", "VF_TEST_KEY"]  # the model's endpoint
            assert main(["reverse-text", flag, str(run), *restated]) == 2
            err = capsys.readouterr().err.replace("\n", " ")
            assert f"{flag} {run} records the env args judge_api_key_var, judge_base_url" in err, (
                err
            )
        # typed again, they get past the check (reverse-text itself takes no judge)
        typed = ["-a", json.dumps(judge), *restated]
        assert main(["reverse-text", "--rescore", str(run), *typed]) == 2
        err = capsys.readouterr().err.replace("\n", " ")
        assert "records the env args" not in err and "judge_base_url" in err, err
        assert catcher.caught == []  # nothing reached it, with a key or without
    finally:
        catcher.close()
    # the user's own run, its endpoint and key named again: it continues (it was complete)
    (run / "metadata.json").write_text(metadata)
    requests = len(server.requests)
    assert main(["reverse-text", "--resume", str(run)]) == 2  # not on the run dir's word
    capsys.readouterr()
    assert (
        main(["reverse-text", "--resume", str(run), "-b", server.base_url, "-k", "VF_TEST_KEY"])
        == 0
    )
    assert len(server.requests) == requests  # nothing left to generate
    # without a key to send (the variable unset), the run dir's endpoint is restored as before
    monkeypatch.delenv("VF_TEST_KEY")
    assert main(["reverse-text", "--resume", str(run)]) == 0
