"""``vf-eval ID`` on v1 tasksets, end to end against the scripted endpoint: a tool-using
taskset (``support.v1_calc``: a Python toolset, a tool that raises, a malformed call), upstream's
color-codeword-v1 (a multi-turn env with images) when its checkout is at hand, results and
metadata as a classic run writes them and ``traces.jsonl`` read back as ``WireEpisode``s."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.eval_runs import answers_then_holds, interrupt_partway
from support.v1_calc import calc_policy, call, install_calc

import verifiers.v1 as vf
from verifiers.cli.eval import main
from verifiers.results import read_rows
from verifiers.results.report import load_run, timing
from verifiers.testing import Reply


@pytest.fixture
def calc_package(tmp_path, monkeypatch) -> Iterator[Path]:
    yield from install_calc(tmp_path / "pkgs", monkeypatch)


def run_dir(output: Path) -> Path:
    runs = list((output / "evals").glob("*/*"))
    assert len(runs) == 1, runs
    return runs[0]


def test_vf_eval_runs_a_tool_using_v1_taskset(server, tmp_path, calc_package):
    server.set_handler(calc_policy)
    out = tmp_path / "out"
    argv = ["calc-v1", "-b", server.base_url, "-m", "test-model", "-n", "2", "-r", "2"]
    assert main([*argv, "--output-dir", str(out)]) == 0
    run = run_dir(out)
    rows = list(read_rows(run / "results.jsonl"))
    assert len(rows) == 4
    assert all(r["reward"] == 1.0 and r["error"] is None for r in rows)
    assert all(r["metrics"]["tool_calls"] == 1.0 for r in rows)
    metadata = json.loads((run / "metadata.json").read_text())
    assert metadata["env_id"] == "calc-v1" and metadata["status"] == "completed"
    assert (run / "report.html").is_file()
    lines = (run / "traces.jsonl").read_text().splitlines()
    episodes = [vf.WireEpisode.model_validate_json(line) for line in lines]
    assert len(episodes) == 4 and all(e.ok for e in episodes)
    trace = episodes[0].traces[0]
    assert trace.rewards["correct"] == vf.Reward(score=1.0)
    assert [t.name for t in trace.tools] == ["calc_add", "calc_explode"]
    assert trace.num_turns == 4 and len(trace.tool_messages) == 3
    assert trace.task.data.model_dump()["answer"] in trace.last_reply


@pytest.mark.parametrize("workers", [[], ["--no-env-workers"]])
def test_a_v1_run_sends_the_key_of_the_variable_it_was_given(
    tmp_path, calc_package, monkeypatch, workers
):
    """A v1 taskset's model calls carried no key of the run (its episodes read the key off a
    client attribute the lean client lacks, then fell back to ``$OPENAI_API_KEY`` or none): a
    run with ``-k VAR`` against a keyed endpoint failed every rollout with a 401."""
    from verifiers.testing import ModelServer

    monkeypatch.setenv("VF_TEST_V1_KEY", "right")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with ModelServer(calc_policy, api_key="right") as keyed:
        argv = ["calc-v1", "-b", keyed.base_url, "-m", "test-model", "-n", "2", "-r", "1"]
        argv += ["-k", "VF_TEST_V1_KEY", *workers, "--output-dir", str(tmp_path / "out")]
        assert main(argv) == 0
    rows = list(read_rows(run_dir(tmp_path / "out") / "results.jsonl"))
    assert len(rows) == 2 and all(r["error"] is None and r["reward"] == 1.0 for r in rows)


def test_v1_rows_carry_the_usage_turns_and_time_of_their_model_calls(
    server, tmp_path, calc_package
):
    """Each row's tokens are the usage the server sent for its rollout's calls, summed; its
    turns the number of calls; its generation time real; and the summary and the report read
    the same numbers, as for a classic row."""
    server.set_handler(calc_policy)
    out = tmp_path / "out"
    argv = ["calc-v1", "-b", server.base_url, "-m", "test-model", "-n", "2", "-r", "2"]
    assert main([*argv, "--output-dir", str(out)]) == 0
    run = run_dir(out)
    rows = list(read_rows(run / "results.jsonl"))
    assert len(server.requests) == len(server.replies) == 16  # 4 rollouts of 4 calls
    sent: dict[str, list[int]] = {}  # prompt -> [prompt tokens, completion tokens, calls]
    for request, reply in zip(server.requests, server.replies, strict=True):
        counts = sent.setdefault(request["messages"][0]["content"], [0, 0, 0])
        counts[0] += reply["usage"]["prompt_tokens"]
        counts[1] += reply["usage"]["completion_tokens"]
        counts[2] += 1
    assert all(c > 0 for counts in sent.values() for c in counts)
    got: dict[str, list[int]] = {}
    for row in rows:
        assert row["turns"] == 4 and row["is_truncated"] is False
        assert row["timing"]["generation_ms"] > 0 and row["timing"]["model_ms"] > 0
        assert row["timing"]["model_ms"] <= row["timing"]["generation_ms"]
        counts = got.setdefault(row["prompt"][0]["content"], [0, 0, 0])
        counts[0] += row["usage"]["prompt_tokens"]
        counts[1] += row["usage"]["completion_tokens"]
        counts[2] += row["turns"]
    assert got == sent
    summary = json.loads((run / "metadata.json").read_text())["summary"]
    assert summary["usage"] == {
        "prompt_tokens": sum(c[0] for c in sent.values()),
        "completion_tokens": sum(c[1] for c in sent.values()),
    }
    mean_generation = sum(r["timing"]["generation_ms"] for r in rows) / len(rows)
    assert summary["avg_generation_ms"] == pytest.approx(mean_generation)
    assert timing(load_run(run)["rows"])["generation_ms"] == pytest.approx(mean_generation)


SUMS_V1 = """
import verifiers.v1 as vf


class SumsData(vf.TaskData):
    answer: str


class SumsTask(vf.Task[SumsData]):
    @vf.reward
    def correct(self, trace) -> float:
        return float(trace.last_reply == self.data.answer)


class SumsTaskset(vf.Taskset[SumsTask, vf.TasksetConfig]):
    def load(self):
        for i, q in enumerate(QUESTIONS):
            yield SumsTask(SumsData(idx=i, prompt=q, answer="5"), self.config.task)


__all__ = ["SumsTaskset"]
"""

SUMS_CLASSIC = """
import verifiers as vf


def correct(completion, answer) -> float:
    return float(completion[-1]["content"] == answer)


def load_environment():
    rows = [{"question": q, "answer": "5"} for q in QUESTIONS]
    return vf.SingleTurnEnv(dataset=rows, rubric=vf.Rubric(funcs=[correct]))
"""


def test_a_v1_row_counts_tokens_and_turns_as_the_classic_row_of_the_same_run(
    server, tmp_path, monkeypatch
):
    """One prompt set, one scripted model, run as a classic environment and as a v1 taskset:
    the rows' token counts and turns are the same, and both timed."""
    questions = 'QUESTIONS = ["What is 2 + 3?", "Add two and three, please: 2 + 3 = ?"]\n'
    root = tmp_path / "pkgs"
    (root / "sums_v1").mkdir(parents=True)
    (root / "sums_v1" / "__init__.py").write_text(questions + SUMS_V1)
    (root / "sums_classic.py").write_text(questions + SUMS_CLASSIC)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", str(root))
    server.set_handler(lambda request: "5")
    rows = {}
    for env_id in ("sums-classic", "sums-v1"):
        out = tmp_path / env_id
        argv = [env_id, "-b", server.base_url, "-m", "test-model", "-n", "2", "-r", "1"]
        assert main([*argv, "--no-env-workers", "--output-dir", str(out)]) == 0
        rows[env_id] = {r["example_id"]: r for r in read_rows(run_dir(out) / "results.jsonl")}
    sys.modules.pop("sums_v1", None)
    sys.modules.pop("sums_classic", None)
    assert len(server.requests) == 4
    for example_id, classic in rows["sums-classic"].items():
        v1_row = rows["sums-v1"][example_id]
        assert classic["reward"] == v1_row["reward"] == 1.0
        assert v1_row["usage"] == classic["usage"] and classic["usage"]["prompt_tokens"] > 0
        assert v1_row["turns"] == classic["turns"] == 1
        assert v1_row["timing"]["generation_ms"] > 0 and classic["timing"]["generation_ms"] > 0


def always_a_tool_call(request: dict) -> Reply:
    """A model that never stops calling a tool (a small model looping on its tools)."""
    return Reply(tool_calls=[call("calc_add", '{"a": 1, "b": 2}', len(request["messages"]))])


def test_a_model_that_never_stops_calling_tools_ends_at_the_default_turn_cap(
    server, tmp_path, calc_package, capsys
):
    """No cap set anywhere (upstream's ``max_turns`` is None): vf-eval still ends the rollout,
    after ``DEFAULT_MAX_TURNS`` model calls, and the row, the trace and the run's last lines
    say it was truncated at ``max_turns``."""
    from verifiers.v1.eval_env import DEFAULT_MAX_TURNS

    server.set_handler(always_a_tool_call)
    out = tmp_path / "out"
    argv = ["calc-v1", "-b", server.base_url, "-m", "test-model", "-n", "1", "-r", "1"]
    assert main([*argv, "--output-dir", str(out)]) == 0
    assert len(server.requests) == DEFAULT_MAX_TURNS
    run = run_dir(out)
    [row] = read_rows(run / "results.jsonl")
    assert row["is_truncated"] is True and row["stop_condition"] == "max_turns"
    assert row["turns"] == DEFAULT_MAX_TURNS and row["error"] is None
    [episode] = [vf.WireEpisode.model_validate_json(x) for x in (run / "traces.jsonl").open()]
    trace = episode.traces[0]
    assert trace.stop_condition == "max_turns" and trace.is_truncated and trace.ok
    assert trace.agent.config.max_turns == DEFAULT_MAX_TURNS
    err = capsys.readouterr().err
    assert "1 of 1 rollouts were truncated (1 at max_turns" in err
    assert '"max_turns": N' in err


def test_default_max_turns_null_keeps_upstreams_uncapped_seat(server, tmp_path, calc_package):
    """``-a '{"default_max_turns": null}'``: a seat that sets no cap keeps none (upstream's, and
    ``run_eval_server``'s), and the episode's agent config records only the sampling the run
    asked for (not the classic engine's ``n``/``extra_body`` defaults)."""
    server.set_handler(calc_policy)
    out = tmp_path / "out"
    argv = ["calc-v1", "-b", server.base_url, "-m", "test-model", "-n", "1", "-r", "1", "-T", "0.5"]
    argv += ["-a", '{"default_max_turns": null}', "--no-env-workers", "--output-dir", str(out)]
    assert main(argv) == 0
    lines = (run_dir(out) / "traces.jsonl").read_text().splitlines()
    [episode] = [vf.WireEpisode.model_validate_json(line) for line in lines]
    config = episode.traces[0].agent.config
    assert episode.ok and config.max_turns is None
    assert config.sampling.model_dump(exclude_none=True) == {"temperature": 0.5}


@pytest.mark.parametrize(
    ("agent", "stop", "calls"),
    [({"max_turns": 3}, "max_turns", 3), ({"max_input_tokens": 1}, "max_input_tokens", 1)],
)
def test_a_cap_given_with_env_args_ends_the_rollout_at_it(
    server, tmp_path, calc_package, agent, stop, calls
):
    """``-a '{"env": {"agent": {...}}}'`` sets the seat's caps: a turn cap, and a token
    cap checked between turns (the turn that crosses it completes)."""
    server.set_handler(always_a_tool_call)
    out = tmp_path / "out"
    env_args = json.dumps({"env": {"agent": agent}})
    argv = ["calc-v1", "-b", server.base_url, "-m", "test-model", "-n", "1", "-r", "1"]
    assert main([*argv, "-a", env_args, "--output-dir", str(out)]) == 0
    assert len(server.requests) == calls
    [row] = read_rows(run_dir(out) / "results.jsonl")
    assert row["is_truncated"] is True and row["stop_condition"] == stop
    assert row["turns"] == calls


def test_a_failing_model_is_an_error_on_the_trace_not_a_dead_run(server, tmp_path, calc_package):
    server.set_handler(calc_policy)
    server.enqueue(Reply(status=400, error="bad request for one rollout"))
    out = tmp_path / "out"
    argv = ["calc-v1", "-b", server.base_url, "-m", "test-model", "-n", "2", "-r", "1", "-c", "1"]
    assert main([*argv, "--output-dir", str(out)]) == 0
    run = run_dir(out)
    rows = list(read_rows(run / "results.jsonl"))
    failed = [r for r in rows if r["error"] is not None]
    assert len(failed) == 1 and "ProviderError" in failed[0]["error"]["message"]
    episodes = [
        vf.WireEpisode.model_validate_json(x)
        for x in (run / "traces.jsonl").read_text().splitlines()
    ]
    bad = [e for e in episodes if not e.ok]
    assert len(bad) == 1 and bad[0].traces[0].errors[0].status_code == 400


def comparable(row: dict) -> dict:
    """A row without what differs between two runs of one scripted model (its timings)."""
    return {k: v for k, v in row.items() if k != "timing"}


def episode_outcome(episode: vf.WireEpisode) -> list:
    """What an episode says about its rollout, without its ids and times."""
    return [
        (
            [m.model_dump(exclude={"id"}) for m in t.branches[-1].messages],
            {n: r.score if r else None for n, r in t.rewards.items()},
            t.metrics,
            t.stop_condition,
            t.num_turns,
        )
        for t in episode.traces
    ]


def traces_by_rollout(run: Path) -> dict[tuple[int, int], vf.WireEpisode]:
    """Each line of ``traces.jsonl`` by its row's key; a key twice fails."""
    found: dict[tuple[int, int], vf.WireEpisode] = {}
    for line in (run / "traces.jsonl").read_text().splitlines():
        keys = json.loads(line)
        key = (keys["example_id"], keys["rollout_index"])
        assert key not in found, f"rollout {key} has two traces"
        found[key] = vf.WireEpisode.model_validate_json(line)
    return found


def test_env_workers_run_a_v1_taskset_with_the_rows_and_traces_of_an_in_process_run(
    server, tmp_path, calc_package
):
    """The default path (env workers) runs the taskset in worker processes: its rows are the
    in-process run's (``--no-env-workers``), and the parent writes one trace per row."""
    server.set_handler(calc_policy)
    runs = {}
    for mode in ("--env-workers=2", "--no-env-workers"):
        out = tmp_path / mode.strip("-")
        argv = ["calc-v1", "-b", server.base_url, "-m", "test-model", "-n", "2", "-r", "2", mode]
        assert main([*argv, "--output-dir", str(out)]) == 0
        runs[mode] = run_dir(out)
    workers_run, local_run = runs["--env-workers=2"], runs["--no-env-workers"]
    described = json.loads((workers_run / "metadata.json").read_text())["env_workers"]
    assert described["kind"] == "processes" and described["workers"] == 2, described
    assert "env_workers" not in json.loads((local_run / "metadata.json").read_text())

    def rows_of(run: Path) -> dict:
        return {(r["example_id"], r["rollout_index"]): r for r in read_rows(run / "results.jsonl")}

    in_workers, in_process = rows_of(workers_run), rows_of(local_run)
    assert len(in_workers) == 4 and all(r["reward"] == 1.0 for r in in_workers.values())
    assert {k: comparable(r) for k, r in in_workers.items()} == {
        k: comparable(r) for k, r in in_process.items()
    }
    worker_traces, local_traces = traces_by_rollout(workers_run), traces_by_rollout(local_run)
    assert worker_traces.keys() == local_traces.keys() == in_workers.keys()
    for key, episode in worker_traces.items():
        assert episode.ok and episode_outcome(episode) == episode_outcome(local_traces[key])
        assert episode.traces[0].rewards["correct"] == vf.Reward(score=in_workers[key]["reward"])


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_an_interrupted_v1_run_resumes_with_each_rollout_once_in_rows_and_traces(
    server, tmp_path, monkeypatch, sig
):
    """A vf-eval of a v1 taskset (in env workers) stopped mid-run, then ``--resume``d: every
    rollout has exactly one row and one trace, whatever the stop left behind (a group's traces
    flushed without its rows, a torn last line)."""
    questions = 'QUESTIONS = [f"What is {i} + 5 - {i}?" for i in range(12)]\n'
    root = tmp_path / "pkgs"
    (root / "sums_v1").mkdir(parents=True)
    (root / "sums_v1" / "__init__.py").write_text(questions + SUMS_V1)
    monkeypatch.setenv("PYTHONPATH", f"{root}:{os.environ.get('PYTHONPATH', '')}")
    server.set_handler(answers_then_holds(lambda request: "5", 12))  # 6 groups, then it waits
    cmd = [sys.executable, "-m", "verifiers.cli.eval", "sums-v1", "-b", server.base_url]
    cmd += ["-m", "test-model", "-n", "12", "-r", "2", "-c", "4", "--env-workers", "2"]
    _, _, run = interrupt_partway(cmd, tmp_path / "cut", 6, sig)
    saved = list(read_rows(run / "results.jsonl"))
    assert 6 <= len(saved) < 24
    done = {r["example_id"] for r in saved}
    orphan = next(i for i in range(12) if i not in done)
    line = (run / "traces.jsonl").read_text().splitlines()[0]
    with (run / "traces.jsonl").open("a") as f:  # a group's traces flushed, its rows never
        keyed = json.loads(line) | {"example_id": orphan, "rollout_index": 0}
        f.write(json.dumps(keyed) + "\n" + line[: len(line) // 2])
    server.set_handler(lambda request: "5")
    resumed = subprocess.run(
        [*cmd[:4], "--resume", str(run)], capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    rows = {(r["example_id"], r["rollout_index"]): r for r in read_rows(run / "results.jsonl")}
    assert len(rows) == 24 and all(r["reward"] == 1.0 for r in rows.values())
    traces = traces_by_rollout(run)
    assert traces.keys() == rows.keys()
    for key, episode in traces.items():
        assert episode.traces[0].last_reply == "5"
        assert (
            episode.traces[0].task.data.model_dump()["prompt"] == rows[key]["prompt"][0]["content"]
        )
    meta = json.loads((run / "metadata.json").read_text())
    assert meta["status"] == "completed" and meta["resumed"] == 1


def test_a_harness_this_sdk_lacks_is_named(server, tmp_path, calc_package, capsys):
    env_args = json.dumps({"env": {"agent": {"harness": {"id": "claude-code"}}}})
    argv = ["calc-v1", "-b", server.base_url, "-m", "test-model", "-n", "1", "-a", env_args]
    assert main([*argv, "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "claude-code" in err and "not in this SDK" in err


COLOR = Path("/tmp/up030/environments/color_codeword_v1")


@pytest.mark.skipif(not COLOR.is_dir(), reason="upstream v0.3.0's color_codeword_v1 checkout")
def test_vf_eval_runs_upstreams_color_codeword_v1(server, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(COLOR))
    monkeypatch.setenv("PYTHONPATH", f"{COLOR}:{os.environ.get('PYTHONPATH', '')}")  # workers
    server.set_handler(lambda request: "AB")
    out = tmp_path / "out"
    argv = ["color-codeword-v1", "-b", server.base_url, "-m", "test-model", "-n", "2", "-r", "1"]
    assert main([*argv, "--output-dir", str(out)]) == 0
    run = run_dir(out)
    rows = list(read_rows(run / "results.jsonl"))
    assert len(rows) == 2 and all(r["error"] is None for r in rows)
    assert all("partial_match" in r["metrics"] for r in rows)
    episodes = [
        vf.WireEpisode.model_validate_json(x)
        for x in (run / "traces.jsonl").read_text().splitlines()
    ]
    assert all(e.traces[0].num_turns == 3 for e in episodes)  # three scripted user turns
