"""Every documented path runs as written (issue 40): each ```python block of README.md and
docs/*.md is executed, and each shell line is run (against the loopback ``ModelServer`` or a
local ``prime hub serve``, in a temp HOME) or listed in ``SKIPPED`` with why and the test that
covers it. A new block or line that is neither fails ``test_every_doc_block_and_line_is_run_or_listed``:
a doc line comes with its test. What a block needs to run here (a prelude for a fragment, a
loopback URL for a remote one) is in ``SUBSTITUTIONS``, one reason a line.

Beside the blocks, the public entry points (``evaluate``/``evaluate_sync``) are run with what
users hand them: a base URL, a default ``AsyncOpenAI``, one with its own ``http_client`` and an
``httpx.Timeout``, the ``vf.*Client`` wrappers and a ``ClientConfig``, with and without
environment workers (a default ``AsyncOpenAI`` with ``env_workers`` once died on ``float()``).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.docs import defined_tests
from support.hubs import fresh_venv

from hub_client.client import HubClient
from hub_server.process import free_port
from verifiers.testing import ModelServer, Reply, cli, conversation, last_user_text

ROOT = Path(__file__).resolve().parents[2]
DOC_FILES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("docs/*.md"))]
FENCE = re.compile(r"^```(\S*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
TRAILING_COMMENT = re.compile(r"\s{2,}#\s.*$")
RUNNABLE = ("python", "bash")


# --- the documents' blocks and lines ------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    file: str
    lang: str
    text: str

    @property
    def first_line(self) -> str:
        return self.text.strip().splitlines()[0]


def doc_blocks() -> list[Block]:
    return [
        Block(file, lang, text)
        for file in DOC_FILES
        for lang, text in FENCE.findall((ROOT / file).read_text())
    ]


def shell_lines(block: Block) -> list[str]:
    """A bash block's commands: continuations joined, comment lines and trailing comments gone."""
    joined = block.text.replace("\\\n", " ")
    lines = [TRAILING_COMMENT.sub("", line).strip() for line in joined.splitlines()]
    return [re.sub(r"\s+", " ", line) for line in lines if line and not line.startswith("#")]


def doc_shell_lines() -> list[tuple[str, str]]:
    return [(b.file, line) for b in doc_blocks() if b.lang == "bash" for line in shell_lines(b)]


def matching(file: str, start: str, lines: list[tuple[str, str]] | None = None) -> list[str]:
    """The shell lines of ``file`` that a key names: the line equal to it, else those it starts."""
    lines = doc_shell_lines() if lines is None else lines
    ours = [line for f, line in lines if f == file]
    return [line for line in ours if line == start] or [s for s in ours if s.startswith(start)]


def the_line(file: str, start: str) -> str:
    """The one shell line of ``file`` that ``start`` names."""
    found = matching(file, start)
    assert len(found) == 1, f"{file}: {len(found)} shell lines start with {start!r}: {found}"
    return found[0]


# --- what a block or line needs to run here: ONE table ----------------------------------------
@dataclass(frozen=True)
class Sub:
    reason: str
    replace: tuple[tuple[str, str], ...] = ()  # (as written, as run); ``{name}`` from the context
    prelude: str = ""  # a fragment's missing imports and names
    expand: tuple[str, ...] = ()  # a synopsis line (``a | b | c``): the commands it stands for


WORKERS = "#env_workers"  # a variant of a Python block: the same call with environment workers
SUBSTITUTIONS: dict[tuple[str, str], Sub] = {
    # Python blocks, keyed by (file, first line)
    (
        "docs/environments.md",
        'def get_weather(city: str, units: Literal["c", "f"] = "c") -> str:',
    ): Sub(
        "a fragment: its imports and `rows`; the ToolEnv kept under a name, since the block rebinds `env`",
        replace=(("env = vf.ToolEnv(", "tool_env = env = vf.ToolEnv("),),
        prelude=(
            "from typing import Literal\n\nimport verifiers as vf\n\n"
            "rows = [{'question': 'Weather in Paris?', 'answer': 'sunny'}]\n"
        ),
    ),
    ("docs/environments.md", "from verifiers.testing import ModelServer, Reply"): Sub(
        "a fragment: `env` is the environment the reader is testing (one that wants <answer>4</answer>)",
        prelude=(
            "import verifiers as vf\n\n"
            "_parser = vf.XMLParser(['answer'], answer_field='answer')\n"
            "env = vf.SingleTurnEnv(dataset=[{'question': '2+2?', 'answer': '4'}], parser=_parser,\n"
            "    rubric=vf.Rubric(funcs=[lambda completion, answer: float(\n"
            "        _parser.parse_answer(completion) == answer)], parser=_parser))\n"
        ),
    ),
    ("docs/evaluating.md", "from openai import AsyncOpenAI"): Sub(
        "the reader's endpoint, model and environment: the loopback server and an installed example",
        replace=(
            ('"http://localhost:8000/v1"', '"{base_url}"'),
            ('"my-env"', '"reverse-text"'),
            ("num_examples=100", "num_examples=5"),  # size only: 400 rollouts prove nothing more
        ),
    ),
    ("docs/evaluating.md", "from openai import AsyncOpenAI" + WORKERS): Sub(
        "the same call with the prose's `env_workers=` (the default AsyncOpenAI once died there)",
        replace=(
            ('"http://localhost:8000/v1"', '"{base_url}"'),
            ('"my-env"', '"reverse-text"'),
            ("num_examples=100", "num_examples=5"),
            ("max_concurrent=64,", "max_concurrent=64, env_workers=2,"),
        ),
    ),
    # shell lines, keyed by (file, the line's start)
    ("README.md", "vf-eval word-count -n 10 -r 4"): Sub(
        "the loopback server instead of the embedded model (minutes on 2 cores)",
        replace=(("-r 4", "-r 4 -b {base_url} -m scripted"),),
    ),
    ("docs/hub.md", "prime hub serve --data-dir ~/.prime-hub &"): Sub(
        "a free port (tests run side by side); no SDK wheel build (seconds of CPU; /sdk/ unused here)",
        replace=(("~/.prime-hub &", "~/.prime-hub --port {hub_port} --no-sdk &"),),
    ),
    ("docs/hub.md", "prime login --url http://127.0.0.1:8787"): Sub(
        "the hub's free port", replace=(("127.0.0.1:8787", "127.0.0.1:{hub_port}"),)
    ),
    ("docs/hub.md", "vf-eval alice/word-count"): Sub(
        "the loopback server instead of the embedded model",
        replace=(("alice/word-count", "alice/word-count -b {base_url} -m scripted -n 3 -r 2"),),
    ),
    ("docs/hub.md", "prime eval push outputs/evals/alice--word-count--.../RUN"): Sub(
        "the run directory the previous line made",
        replace=(("outputs/evals/alice--word-count--.../RUN", "{run_dir}"),),
    ),
    ("docs/hub.md", "prime env list | search QUERY"): Sub(
        "a synopsis of subcommands: each run on the pushed environment, deletes last",
        expand=(
            "prime env list",
            "prime env search word",
            "prime env info alice/word-count",
            "prime env versions alice/word-count",
            "prime env yank alice/word-count@0.1.0",
            "prime env pull alice/word-count@0.1.1 --dir pulled",
            "prime env uninstall alice/word-count",
            "prime env delete alice/word-count@0.1.0 --yes",
        ),
    ),
    ("docs/hub.md", "prime env info owner/name@1.2.0 | versions"): Sub(
        "a synopsis: each form on the pushed environment's second version",
        expand=(
            "prime env info alice/word-count@0.1.1",
            "prime env versions alice/word-count --output json",
            "prime env yank alice/word-count@0.1.1",
            "prime env yank alice/word-count@0.1.1 --undo",
        ),
    ),
    ("docs/hub.md", "prime token create ci --scope read"): Sub(
        "a synopsis: create, list, then revoke the token just made (its id from list)",
        expand=(
            "prime token create ci --scope read --expires-in-days 30",
            "prime token list",
            "prime token revoke {token_id}",
        ),
    ),
    ("docs/evaluating.md", "vf-eval my-env --env-workers 4"): Sub(
        "an installed example and the loopback server; 2 workers on 2 cores",
        replace=(("my-env --env-workers 4", "reverse-text --env-workers 2 {eval_flags}"),),
    ),
    ("docs/evaluating.md", "vf-eval my-env --no-env-workers"): Sub(
        "an installed example and the loopback server",
        replace=(("my-env --no-env-workers", "reverse-text --no-env-workers {eval_flags}"),),
    ),
    ("docs/evaluating.md", "vf-env-server my-env --host 0.0.0.0"): Sub(
        "loopback and a free port instead of the worker machine's address; 1 worker",
        replace=(
            (
                "my-env --host 0.0.0.0 --port 5555 --workers auto",
                "reverse-text --host 127.0.0.1 --port {env_port} --workers 1 &",
            ),
        ),
    ),
    ("docs/evaluating.md", "vf-eval my-env --env-server workers-1:5555"): Sub(
        "the one loopback env server for both hosts; the loopback model server",
        replace=(
            ("my-env", "reverse-text"),
            ("workers-1:5555", "127.0.0.1:{env_port}"),
            ("workers-2:5555", "127.0.0.1:{env_port}"),
            ("-b http://gpu-box:8000/v1", "-b {base_url} -m scripted -n 3 -r 2"),
        ),
    ),
}


def as_run(file: str, key: str, text: str, context: dict[str, Any] | None = None) -> str:
    """``text`` with the substitutions declared for (file, key); each must still apply."""
    sub = SUBSTITUTIONS.get((file, key))
    if sub is None:
        return text
    for old, new in sub.replace:
        assert old in text, f"{file} {key!r}: the substitution {old!r} no longer applies"
        text = text.replace(old, new.format(**(context or {})))
    return sub.prelude + text


# --- lines that cannot run here: ONE table ------------------------------------------------------
@dataclass(frozen=True)
class Skip:
    reason: str
    covered_by: str | None = None  # the test that runs it elsewhere (tests/x.py::test_y)


E2E = "tests/workflows/test_e2e.py"
OFFICIAL = "tests/hub_server/test_official_prime.py"
EVALS = "test_official_eval_push_attaches_the_run_to_its_version_and_lists_it"
LOGIN = "test_official_login_is_approved_in_the_browser_and_saves_a_working_key"
TWO_PROCESSES = (
    "tests/hub_server/test_hub_publishing.py::"
    "test_concurrent_pushes_across_two_hub_processes_leave_one_consistent_store"
)
VALID_CONFIG = (
    "tests/rl/test_rl_cli.py::"
    "test_every_example_config_is_a_valid_vf_rl_config_for_an_installed_environment"
)
TRUSTED_PROXY = "tests/hub_server/test_hub_attacks.py::test_cookies_are_secure_and_host_bound_behind_a_trusted_tls_proxy"
PIPELINE = "tests/workflows/test_scripts.py::test_the_pipeline_resumes_after_an_interruption_and_scales"
PIPELINE_STOPPED = (
    "tests/workflows/test_pipeline_stopped.py::"
    "test_the_pipeline_stopped_in_generation_and_in_rl_goes_on_from_where_it_was"
)
NETWORK = "installs from the network (PyPI, the CPU torch index) into a new .venv"
PRODUCTION = "a PostgreSQL server and an S3 bucket of a deployment"
CPU_TRAINING = "minutes of CPU training per run"

SKIPPED: dict[tuple[str, str], Skip] = {
    ("README.md", "bash scripts/setup.sh && .venv/bin/vf-eval reverse-text"): Skip(
        NETWORK + "; the eval then runs the embedded model",
        f"{E2E}::test_vf_eval_reverse_text_on_the_embedded_model",
    ),
    ("README.md", "bash scripts/setup.sh && .venv/bin/python -m pytest"): Skip(
        NETWORK + "; the second half is the suite itself (.ci/run)"
    ),
    ("README.md", "vf-eval word-count -m gpt-4.1-mini -b https://api.openai.com/v1"): Skip(
        "a remote endpoint and a key",
        "tests/cli/test_cli_eval.py::test_eval_targets_each_model_api",
    ),
    ("README.md", "prime hub serve --data-dir /srv/prime-hub --host 0.0.0.0"): Skip(
        "listens on every interface of this machine at a fixed port, for a public URL",
        "tests/hub_server/test_hub_attacks.py::test_a_hubs_sdk_install_line_is_its_own_url_not_the_host_header",
    ),
    ("README.md", 'pip install -e ".[hub-postgres,hub-s3]"'): Skip(NETWORK, TWO_PROCESSES),
    ("README.md", "prime hub serve --db postgresql://hub@db.internal/hub"): Skip(
        PRODUCTION, TWO_PROCESSES
    ),
    ("docs/evaluating.md", "curl -s http://HUB:8787/sdk/"): Skip(
        "a second machine; the SDK wheel's dependencies come from the network",
        "tests/workflows/test_hub_workflow.py::"
        "test_a_second_machine_installs_this_sdk_from_the_hub_then_an_environment",
    ),
    ("docs/evaluating.md", "python3 -m venv .venv && .venv/bin/pip install"): Skip(
        "a second machine; the SDK wheel's dependencies come from the network",
        "tests/workflows/test_hub_workflow.py::"
        "test_a_second_machine_installs_this_sdk_from_the_hub_then_an_environment",
    ),
    ("docs/evaluating.md", ".venv/bin/python -m verifiers.local_model.stack"): Skip(
        NETWORK + " (torch, 3 GB without the CPU index)"
    ),
    ("docs/evaluating.md", ".venv/bin/prime login --url http://HUB:8787"): Skip(
        "a second machine",
        "tests/workflows/test_hub_workflow.py::"
        "test_a_second_machine_installs_this_sdk_from_the_hub_then_an_environment",
    ),
    ("docs/hub.md", "python3 -m venv ~/.venvs/prime-official"): Skip(
        "Prime's official CLI from PyPI", f"{OFFICIAL}::test_reads_install_pull_and_deletes"
    ),
    **{
        ("docs/hub.md", start): Skip(
            "Prime's official CLI, run by its own test", f"{OFFICIAL}::{test}"
        )
        for start, test in [
            ("alias prime-official=", "test_reads_install_pull_and_deletes"),
            ("prime-official config set-base-url", "test_reads_install_pull_and_deletes"),
            ("prime-official whoami", "test_reads_install_pull_and_deletes"),
            ("prime-official env list", "test_reads_install_pull_and_deletes"),
            ("prime-official env push", "test_official_push_is_judged_as_a_native_push"),
            ("prime-official env install", "test_reads_install_pull_and_deletes"),
            ("prime-official env pull", "test_reads_install_pull_and_deletes"),
            ("prime-official env version delete", "test_reads_install_pull_and_deletes"),
            ("prime-official env delete", "test_reads_install_pull_and_deletes"),
            ("prime-official config set-frontend-url", EVALS),
            ("prime-official login", LOGIN),
            ("prime-official eval push", EVALS),
            ("prime-official eval list", EVALS),
        ]
    },
    ("docs/hub.md", "prime hub serve --data-dir /srv/prime-hub --host 0.0.0.0"): Skip(
        "listens on every interface of this machine behind a TLS proxy at a fixed address",
        TRUSTED_PROXY,
    ),
    ("docs/hub.md", "prime hub create-user admin --admin --data-dir /srv/prime-hub"): Skip(
        "a deployment's data dir (the same command on a temp one runs in the hub workflow here)",
        "tests/hub_server/test_hub_reads.py::test_an_admin_users_first_token_says_it_holds_admin",
    ),
    ("docs/hub.md", 'pip install -e ".[hub-postgres,hub-s3]"'): Skip(NETWORK, TWO_PROCESSES),
    ("docs/hub.md", "export AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=..."): Skip(
        "a deployment's credentials", TWO_PROCESSES
    ),
    ("docs/hub.md", "prime hub create-user admin --admin --db postgresql://"): Skip(
        PRODUCTION, TWO_PROCESSES
    ),
    ("docs/hub.md", "prime hub serve --port 8787 --db postgresql://"): Skip(
        PRODUCTION, TWO_PROCESSES
    ),
    ("docs/hub.md", "prime hub serve --port 8788 --db postgresql://"): Skip(
        PRODUCTION, TWO_PROCESSES
    ),
    ("docs/training.md", "vf-rl @ examples/rl/uppercase_cpu.toml --trainer.loss dapo"): Skip(
        CPU_TRAINING, "tests/rl/test_rl_losses.py::test_dapo_and_dr_grpo_through_vf_rl_are_not_grpo"
    ),
    ("docs/training.md", "vf-rl @ examples/rl/uppercase_cpu.toml --resume"): Skip(
        CPU_TRAINING, "tests/rl/test_rl_cli.py::test_vf_rl_cli_runs_checkpoints_plots_and_resumes"
    ),
    ("docs/training.md", "vf-rl @ examples/rl/uppercase_cpu.toml --trainer.lora.rank 16"): Skip(
        CPU_TRAINING,
        "tests/rl/test_rl_weights.py::"
        "test_lora_trains_only_the_adapters_and_the_server_serves_exactly_them",
    ),
    **{
        ("docs/training.md", f"vf-rl @ examples/rl/{config}"): Skip(CPU_TRAINING, VALID_CONFIG)
        for config in (
            "uppercase_cpu.toml",
            "uppercase_v1_cpu.toml",
            "calculator_cpu.toml",
            "reverse_text_cpu.toml",
            "guess_the_number_cpu.toml",
        )
    },
    ("docs/training.md", "vf-report outputs/rl/uppercase-smollm2"): Skip(
        "needs a finished vf-rl run (minutes of CPU training)",
        "tests/rl/test_rl_outputs.py::"
        "test_the_training_report_shows_curves_steps_and_the_tokens_trained_on",
    ),
    ("docs/training.md", "vf-rl @ examples/rl/gpu.toml"): Skip("GPUs and vLLM", VALID_CONFIG),
    ("docs/training.md", "torchrun --standalone --nproc_per_node 4"): Skip(
        "four GPUs", "tests/rl/test_rl_trainer.py::test_fsdp2_data_parallel_step_equals_one_process"
    ),
    ("docs/training.md", "vf-eval uppercase --split train -n 300 -r 8"): Skip(
        "2,400 rollouts of the embedded model: a stage of the 20-minute pipeline", PIPELINE
    ),
    ("docs/training.md", "vf-data outputs/gen/evals/uppercase--SmolLM2-135M-Instruct/*"): Skip(
        "a stage of the 20-minute pipeline", PIPELINE
    ),
    ("docs/training.md", "vf-sft @ examples/sft/uppercase_cpu.toml"): Skip(
        "a stage of the 20-minute pipeline", PIPELINE
    ),
    ("docs/training.md", "vf-rl @ examples/rl/uppercase_cpu.toml --model outputs/sft"): Skip(
        "a stage of the 20-minute pipeline", PIPELINE
    ),
    ("docs/training.md", "vf-eval uppercase -m outputs/rl/after-sft/weights"): Skip(
        "a stage of the 20-minute pipeline", PIPELINE
    ),
    ("docs/training.md", "prime data push data/uppercase-best"): Skip(
        "a stage of the 20-minute pipeline", PIPELINE
    ),
    ("docs/training.md", "bash examples/pipeline/uppercase_cpu.sh"): Skip(
        "the 20-minute pipeline (run for real at PIPELINE_SCALE=0.01, stopped twice)",
        PIPELINE_STOPPED,
    ),
    ("docs/training.md", "PIPELINE_SCALE=0.2 bash examples/pipeline/uppercase_cpu.sh"): Skip(
        "the pipeline at a fifth of its size, still minutes", PIPELINE
    ),
}


def run_calls() -> dict[tuple[str, str], set[str]]:
    """The shell lines this module runs: (file, start) of every ``sh.line``/``sh.start`` call
    with literal arguments, and the tests that make them."""
    calls: dict[tuple[str, str], set[str]] = {}
    tree = ast.parse(Path(__file__).read_text())
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef) or not function.name.startswith("test_"):
            continue
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("line", "start")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "sh"
                and len(node.args) >= 2
                and all(
                    isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args[:2]
                )
            ):
                key = (node.args[0].value, node.args[1].value)  # type: ignore[attr-defined]  # checked just above
                calls.setdefault(key, set()).add(function.name)
    return calls


# --- the class rule -------------------------------------------------------------------------------
def test_every_doc_block_and_line_is_run_or_listed():
    """A block or shell line in README.md or docs/ that no test runs and SKIPPED does not list
    fails here: a new doc line comes with its test (or a reason it cannot run)."""
    blocks = doc_blocks()
    assert {b.lang for b in blocks} <= set(RUNNABLE), (
        f"a fenced block this test cannot run: {[(b.file, b.lang) for b in blocks if b.lang not in RUNNABLE]}"
    )
    python = {(b.file, b.first_line) for b in blocks if b.lang == "python"}
    assert python == set(PYTHON_CHECKS), (
        f"Python blocks with no run: {python - set(PYTHON_CHECKS)}; "
        f"runs of blocks that are gone: {set(PYTHON_CHECKS) - python}"
    )
    runs, lines = run_calls(), doc_shell_lines()
    unlisted, twice = [], []
    for file, line in lines:
        by_run = [k for k in runs if k[0] == file and line in matching(*k, lines)]
        by_skip = [k for k in SKIPPED if k[0] == file and line in matching(*k, lines)]
        if not by_run and not by_skip:
            unlisted.append((file, line))
        if by_run and by_skip:
            twice.append((file, line))
    assert unlisted == [], f"doc lines neither run nor in SKIPPED: {unlisted}"
    assert twice == [], f"doc lines both run and skipped: {twice}"
    for file, start in [*runs, *SKIPPED]:
        matched = matching(file, start, lines)
        assert len(matched) == 1, f"{file}: {start!r} names {len(matched)} doc lines: {matched}"
    for file, key in SUBSTITUTIONS:
        block_key = key.removesuffix(WORKERS)
        assert (file, block_key) in python or (file, key) in runs, (
            f"a substitution for what the docs no longer hold or no test runs: {(file, key)}"
        )


def test_every_skipped_line_names_a_reason_and_a_test_that_exists():
    for (file, start), skip in SKIPPED.items():
        assert skip.reason, f"{file}: {start!r} is skipped without a reason"
        if skip.covered_by is None:
            continue
        path, _, name = skip.covered_by.partition("::")
        assert (ROOT / path).is_file() and name in defined_tests(ROOT / path), (
            f"{file}: {start!r} names a covering test that does not exist: {skip.covered_by}"
        )


# --- the Python blocks ------------------------------------------------------------------------------
def reverser(request: dict[str, Any]) -> str:
    """reverse-text's perfect answer: reward 1.0 (LCS) + 0.2 (format)."""
    text = last_user_text(request).removeprefix("Reverse this text: ")
    return f"<answer>\n{text[::-1]}\n</answer>"


def check_v1_taskset(ns: dict[str, Any], code: str, server: ModelServer, tmp_path: Path) -> None:
    """Put on PYTHONPATH as the prose says, `vf-eval my-taskset-v1 -t 64` runs it: the model
    calls the calc tool, gets 5 and says it."""
    assert ns["__all__"] == ["CalcTaskset"]
    (tmp_path / "my_taskset_v1.py").write_text(code)

    def handler(request: dict[str, Any]) -> Reply | str:
        tool = [m for m in conversation(request) if m.get("role") == "tool"]
        if tool:
            return f"The tool says {tool[-1]['content']}."
        return Reply(tool_calls=[Reply.tool_call("calc_add", {"a": 2, "b": 3})])

    server.set_handler(handler)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [cli("vf-eval"), "my-taskset-v1", "-b", server.base_url, "-m", "scripted",
         "-n", "1", "-r", "1", "-t", "64", "--output-dir", str(tmp_path / "out")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(r) for r in next((tmp_path / "out").rglob("results.jsonl")).open()]
    assert [r["reward"] for r in rows] == [1.0] and not rows[0]["error"]
    assert (next((tmp_path / "out").rglob("traces.jsonl"))).read_text().strip()


def check_load_environment(ns: dict[str, Any], code: str, server: ModelServer, _: Path) -> None:
    env = ns["load_environment"]()
    server.set_handler(lambda request: "<think>easy</think>\n<answer>4</answer>")
    results = env.evaluate_sync(server.base_url, "scripted", rollouts_per_example=2)
    assert results["reward"] == pytest.approx([1.2, 1.2])
    assert "<answer>" in results["prompt"][0][0]["content"], "the format is in the system prompt"


def check_tools(ns: dict[str, Any], code: str, server: ModelServer, _: Path) -> None:
    tool_env, vf = ns["tool_env"], ns["vf"]
    assert isinstance(ns["env"], vf.SandboxEnv)
    (tool,) = tool_env.tool_defs  # schemas from hints + docstrings
    assert tool.name == "get_weather" and tool.description == "Get the weather."
    params = tool.parameters
    assert "city" in params["required"] and params["properties"]["units"]["enum"] == ["c", "f"]
    assert params["properties"]["city"]["description"] == "The city name."

    def handler(request: dict[str, Any]) -> Reply | str:
        if any(m.get("role") == "tool" for m in conversation(request)):
            return "sunny"
        return Reply(tool_calls=[Reply.tool_call("get_weather", {"city": "Paris"})])

    server.set_handler(handler)
    results = tool_env.evaluate_sync(server.base_url, "scripted")
    tool_messages = [m for m in results["completion"][0] if m["role"] == "tool"]
    assert len(tool_messages) == 1 and not results["state"][0].get("error")


def check_model_server(ns: dict[str, Any], code: str, server: ModelServer, _: Path) -> None:
    results, block_server = ns["results"], ns["server"]
    assert results["reward"] == [1.0], "the rate-limited call was retried and then answered"
    assert len(block_server.requests) == 2


def check_from_python(ns: dict[str, Any], code: str, server: ModelServer, tmp_path: Path) -> None:
    results = ns["results"]
    assert len(results["reward"]) == 5 * 4 and results["reward"] == pytest.approx([1.2] * 20)
    assert results.metadata.summary.avg_reward == pytest.approx(1.2)
    assert len(list((tmp_path / "outputs" / "evals").rglob("results.jsonl"))) == 1
    workers = "env_workers=2" in code
    assert (dict(results["metadata"]).get("env_workers") or {}).get("workers") == (
        2 if workers else None
    )
    sent = server.requests[-1]
    assert sent["temperature"] == 0.7 and sent["max_completion_tokens"] == 512


PYTHON_CHECKS: dict[tuple[str, str], Callable[[dict[str, Any], str, ModelServer, Path], None]] = {
    ("docs/environments.md", "import verifiers.v1 as vf"): check_v1_taskset,
    ("docs/environments.md", "import verifiers as vf"): check_load_environment,
    (
        "docs/environments.md",
        'def get_weather(city: str, units: Literal["c", "f"] = "c") -> str:',
    ): check_tools,
    (
        "docs/environments.md",
        "from verifiers.testing import ModelServer, Reply",
    ): check_model_server,
    ("docs/evaluating.md", "from openai import AsyncOpenAI"): check_from_python,
}
PYTHON_RUNS = [
    *(
        pytest.param(key, marks=pytest.mark.slow) if check is check_v1_taskset else key
        for key, check in PYTHON_CHECKS.items()
    ),  # the v1 block runs through vf-eval: about 8 s
    ("docs/evaluating.md", "from openai import AsyncOpenAI" + WORKERS),
]


@pytest.mark.parametrize("key", PYTHON_RUNS, ids=lambda k: f"{k[0]}:{k[1][:40]}")
def test_python_block_runs_as_written(key, server, tmp_path, monkeypatch):
    file, first = key
    block_first = first.removesuffix(WORKERS)
    (block,) = [b for b in doc_blocks() if b.file == file and b.first_line == block_first]
    if block_first.startswith("from verifiers.testing"):  # the block makes its own server
        server.set_handler(lambda request: "<answer>4</answer>")
    else:
        server.set_handler(reverser)
    code = as_run(file, first, block.text, {"base_url": server.base_url})
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "doc_block"}
    exec(compile(code, f"{file}: {first}", "exec"), namespace)
    PYTHON_CHECKS[(file, block_first)](namespace, code, server, tmp_path)


# --- the entry points with what users hand them ------------------------------------------------
def _clients(url: str) -> dict[str, Callable[[], Any]]:
    import openai

    import verifiers as vf

    return {
        "base-url": lambda: url,
        "default-AsyncOpenAI": lambda: openai.AsyncOpenAI(base_url=url, api_key="k"),
        "AsyncOpenAI-http_client-Timeout": lambda: openai.AsyncOpenAI(
            base_url=url,
            api_key="k",
            # what users write: httpx's own types (openai 3.x annotates its vendored httpx2's)
            http_client=httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=2.0)),  # type: ignore[arg-type]
            timeout=httpx.Timeout(20.0, connect=3.0),  # type: ignore[arg-type]
        ),
        "vf.OpenAIChatCompletionsClient(AsyncOpenAI)": lambda: vf.OpenAIChatCompletionsClient(
            openai.AsyncOpenAI(base_url=url, api_key="k")
        ),
        "vf.OpenAIChatCompletionsClient(url)": lambda: vf.OpenAIChatCompletionsClient(url),
        "vf.OpenAIResponsesClient(url)": lambda: vf.OpenAIResponsesClient(url),
        "vf.AnthropicMessagesClient(url)": lambda: vf.AnthropicMessagesClient(url),
        "ClientConfig": lambda: vf.ClientConfig(api_base_url=url),
        "ClientConfig-responses": lambda: vf.ClientConfig(
            client_type="openai_responses", api_base_url=url
        ),
    }


CLIENT_KINDS = list(_clients("http://x/v1"))


@pytest.mark.parametrize(
    "workers", [None, pytest.param(2, marks=pytest.mark.slow)], ids=["in-process", "env_workers=2"]
)
@pytest.mark.parametrize("kind", CLIENT_KINDS)
def test_evaluate_takes_what_users_hand_it(kind, workers, server):
    """``evaluate_sync`` (and so ``evaluate``) with each client users pass, in process and in
    environment workers: every rollout reaches the loopback server and scores."""
    import verifiers as vf

    server.set_handler(reverser)
    env = vf.load_environment("reverse-text")
    client = _clients(server.base_url)[kind]()
    results = env.evaluate_sync(
        client, "scripted", num_examples=3, rollouts_per_example=2, env_workers=workers
    )
    assert results["reward"] == pytest.approx([1.2] * 6), [s.get("error") for s in results["state"]]
    assert len(server.requests) == 6
    ran_in = dict(results["metadata"]).get("env_workers")
    assert (ran_in or {}).get("workers") == workers, ran_in


# --- the shell lines ------------------------------------------------------------------------------
@dataclass
class Shell:
    """Runs doc lines with bash as a user would: a temp HOME, a working directory, the commands
    of one Python on PATH (a fresh venv's, or this one's)."""

    home: Path
    cwd: Path
    bin_dir: Path
    context: dict[str, Any] = field(default_factory=dict)
    started: list[subprocess.Popen] = field(default_factory=list)

    def env(self, bin_dir: Path | None = None) -> dict[str, str]:
        bin_dir = bin_dir or self.bin_dir
        drop = ("PRIME_", "VF_ENV_SECRET", "VIRTUAL_ENV", "OPENAI_")
        env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
        uv_cache = os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv")
        return {
            **env,
            "HOME": str(self.home),
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "VIRTUAL_ENV": str(bin_dir.parent),
            "UV_CACHE_DIR": uv_cache,  # the user's uv cache, not an empty one in the temp HOME
        }

    def commands(self, file: str, start: str) -> list[str]:
        """What runs for the doc line: itself as substituted, or the commands of its synopsis
        (formatted as each runs, so one may use what an earlier one made)."""
        line = the_line(file, start)
        sub = SUBSTITUTIONS.get((file, start))
        if sub and sub.expand:
            return list(sub.expand)
        return [as_run(file, start, line, self.context).replace("{", "{{").replace("}", "}}")]

    def line(
        self,
        file: str,
        start: str,
        stdin: str | None = None,
        after: Callable[[str, str], None] | None = None,
        bin_dir: Path | None = None,
    ) -> str:
        """Run the doc line; its stdout (each command must exit 0). ``after(command, stdout)``
        runs after each command of a synopsis; ``bin_dir``: another Python's commands."""
        out = []
        for template in self.commands(file, start):
            command = template.format(**self.context)
            done = subprocess.run(
                ["bash", "-c", command], cwd=self.cwd, env=self.env(bin_dir), input=stdin,
                capture_output=True, text=True, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
            out.append(done.stdout)
            if after is not None:
                after(command, done.stdout)
        return "".join(out)

    def start(self, file: str, start: str, bin_dir: Path | None = None) -> subprocess.Popen:
        """A line that ends in ``&``: started in a session of its own, stopped at the end."""
        (template,) = self.commands(file, start)
        command = template.format(**self.context)
        assert command.endswith("&"), command
        process = subprocess.Popen(
            ["bash", "-c", f"exec {command.removesuffix('&')}"], cwd=self.cwd, env=self.env(bin_dir),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        self.started.append(process)
        return process

    def stop(self) -> None:
        for process in self.started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()


@pytest.fixture
def venv_shell(tmp_path: Path) -> Iterator[Shell]:
    """A fresh virtualenv with this SDK (what `source .venv/bin/activate` gives a reader)."""
    python = fresh_venv(tmp_path / "venv")
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    sh = Shell(tmp_path / "home", tmp_path / "work", python.parent)
    yield sh
    sh.stop()


def _wait_for(url: str, process: subprocess.Popen, seconds: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, f"exited {process.returncode} before answering {url}"
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {seconds}s")


def _rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def adder(request: dict[str, Any]) -> str:
    """The scaffolded environment's perfect answer (it asks `What is A + B?`)."""
    a, b = re.findall(r"\d+", last_user_text(request))[-2:]
    return f"<answer>{int(a) + int(b)}</answer>"


@pytest.mark.slow
def test_the_readme_authors_workflow_runs_as_written(venv_shell, server):
    sh = venv_shell
    sh.context["base_url"] = server.base_url
    server.set_handler(adder)
    sh.line("README.md", "vf-init word-count")
    assert (sh.cwd / "environments" / "word_count" / "pyproject.toml").is_file()
    sh.line("README.md", "vf-install word-count")
    python = sh.bin_dir / "python"
    done = subprocess.run([python, "-c", "import word_count"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    sh.line("README.md", "vf-eval word-count -n 10 -r 4")
    (run,) = (sh.cwd / "outputs" / "evals").glob("word-count--scripted/*")
    rows = _rows(run)
    assert len(rows) == 40 and all(r["reward"] == pytest.approx(1.2) for r in rows)


@pytest.mark.slow
def test_the_hub_workflow_runs_as_written(venv_shell, server):
    """docs/hub.md's first block, line by line, on a hub started by its own first line; each
    line judged by the hub's API, the venv's imports or the files it leaves."""
    sh = venv_shell
    hub_port = free_port()
    url = f"http://127.0.0.1:{hub_port}"
    sh.context.update(base_url=server.base_url, hub_port=hub_port)
    server.set_handler(adder)
    sh.line("README.md", "vf-init word-count")  # the environment the hub lines push
    sh.line("README.md", "vf-install word-count")  # and installed locally, as the README leaves it

    # the hub's own commands from this checkout's venv (it has the hub's extra; the reader's
    # fresh one has the SDK and the client): the same temp HOME, so the same ~/.prime-hub
    here = Path(sys.executable).parent
    hub = sh.start("docs/hub.md", "prime hub serve --data-dir ~/.prime-hub &", bin_dir=here)
    made = sh.line(
        "docs/hub.md", "prime hub create-user alice --data-dir ~/.prime-hub", bin_dir=here
    )
    token = made.split()[-1]
    _wait_for(f"{url}/health", hub)
    assert (sh.home / ".prime-hub" / "hub.sqlite3").is_file()
    sh.line("docs/hub.md", "prime login --url http://127.0.0.1:8787", stdin=token + "\n")
    config = [
        p for p in (sh.home).rglob("*") if p.is_file() and token in p.read_text(errors="replace")
    ]
    assert len(config) == 1 and (config[0].stat().st_mode & 0o777) == 0o600

    api = HubClient(url, token)
    sh.line("docs/hub.md", "prime env push --path environments/word_count")
    assert [v.version for v in api.versions("alice", "word-count")] == ["0.1.0"]
    sh.line("docs/hub.md", "prime env push --path environments/word_count --bump patch")
    assert sorted(v.version for v in api.versions("alice", "word-count")) == ["0.1.0", "0.1.1"]

    python = sh.bin_dir / "python"

    def installed() -> str:
        done = subprocess.run(
            [python, "-c", "import importlib.metadata as m; print(m.version('word-count'))"],
            capture_output=True, text=True,
        )  # fmt: skip
        return done.stdout.strip() if done.returncode == 0 else ""

    assert installed() == "0.1.0", "the README's local install"
    sh.line("docs/hub.md", "uv pip uninstall word-count")  # else the hub install is refused
    assert installed() == ""
    sh.line("docs/hub.md", "prime env install alice/word-count@0.1.0")
    assert installed() == "0.1.0" and (sh.cwd / "environments.lock").is_file()
    subprocess.run(
        [sh.bin_dir / "uv", "pip", "uninstall", "--python", python, "word-count"],
        check=True, capture_output=True, env=sh.env(),
    )  # fmt: skip
    assert installed() == ""
    sh.line("docs/hub.md", "prime env install --locked")
    assert installed() == "0.1.0"

    sh.line("docs/hub.md", "vf-eval alice/word-count")
    (run,) = (sh.cwd / "outputs" / "evals").glob("alice--word-count--scripted/*")
    assert all(r["reward"] == pytest.approx(1.2) for r in _rows(run)) and len(_rows(run)) == 6
    sh.context["run_dir"] = str(run)
    sh.line("docs/hub.md", "prime eval push outputs/evals/alice--word-count--.../RUN")
    (attached,) = api.evals("alice", "word-count", "0.1.0")
    assert attached.summary["avg_reward"] == pytest.approx(1.2)

    sh.line("docs/hub.md", "prime env info owner/name@1.2.0 | versions")
    assert not api.version("alice", "word-count", "0.1.1").yanked, "yanked, then --undo"
    sh.line("docs/hub.md", "prime env list | search QUERY")
    assert [v.version for v in api.versions("alice", "word-count")] == ["0.1.1"]
    assert installed() == "" and (sh.cwd / "pulled").is_dir()

    def token_made(command: str, _: str) -> None:
        if command.startswith("prime token create"):
            sh.context["token_id"] = {t.name: t.id for t in api.list_tokens()}["ci"]

    sh.line("docs/hub.md", "prime token create ci --scope read", after=token_made)
    assert all(t.revoked for t in api.list_tokens() if t.name == "ci")
    assert httpx.get(f"{url}/api/v1/me", headers={"Authorization": f"Bearer {token}"}).is_success


@pytest.fixture
def sh(tmp_path: Path) -> Iterator[Shell]:
    """This checkout's Python (the example environments installed) in a temp HOME and dir."""
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    shell = Shell(tmp_path / "home", tmp_path / "work", Path(sys.executable).parent)
    yield shell
    shell.stop()


def test_vf_rl_help_runs_as_written(sh):
    out = sh.line("docs/training.md", "vf-rl --help")
    assert "--trainer.loss" in out and "--output_dir" in out


def _run_rewards(cwd: Path, workers: bool) -> list[float]:
    """The sorted rewards of the one reverse-text run under ``cwd`` (then removed), after
    checking its metadata records workers or none."""
    (run,) = (cwd / "outputs" / "evals").glob("reverse-text--scripted/*")
    meta = json.loads((run / "metadata.json").read_text())
    assert bool(meta.get("env_workers")) == workers, meta.get("env_workers")
    rewards = sorted(r["reward"] for r in _rows(run))
    shutil.rmtree(run)
    return rewards


@pytest.mark.slow
def test_the_env_worker_lines_run_as_written(sh, server):
    """`--env-workers N` and `--no-env-workers` give the same rows against the same server."""
    server.set_handler(reverser)
    sh.context.update(eval_flags=f"-b {server.base_url} -m scripted -n 3 -r 2")
    sh.line("docs/evaluating.md", "vf-eval my-env --env-workers 4")
    with_workers = _run_rewards(sh.cwd, workers=True)
    sh.line("docs/evaluating.md", "vf-eval my-env --no-env-workers")
    rewards = [with_workers, _run_rewards(sh.cwd, workers=False)]
    assert rewards[0] == rewards[1] == pytest.approx([1.2] * 6)


@pytest.mark.slow
def test_the_env_server_lines_run_as_written(sh, server):
    """`vf-env-server` makes its secret in the temp HOME; `vf-eval --env-server` (twice the
    same address here) reads it from the same path and its rows come back scored."""
    server.set_handler(reverser)
    env_port = free_port()
    sh.context.update(env_port=env_port, base_url=server.base_url)
    worker = sh.start("docs/evaluating.md", "vf-env-server my-env --host 0.0.0.0")
    secret = sh.home / ".cache" / "verifiers" / "env-server.secret"
    import time

    deadline = time.monotonic() + 60
    while not secret.exists() and time.monotonic() < deadline:
        assert worker.poll() is None, "vf-env-server exited"
        time.sleep(0.2)
    sh.line("docs/evaluating.md", "vf-eval my-env --env-server workers-1:5555")
    (run,) = (sh.cwd / "outputs" / "evals").glob("reverse-text--scripted/*")
    assert [r["reward"] for r in _rows(run)] == pytest.approx([1.2] * 6)
    assert worker.poll() is None
