"""``vf-eval ID --rescore RUN_DIR`` on a run of a v1 taskset: a real run against the scripted
endpoint, then its recorded episodes (``traces.jsonl``) scored again without the model, with the
taskset unchanged (the recorded rewards and metrics back) and with its reward changed (the new
scores, in rows, traces and the changes table)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import verifiers.v1 as vf
from verifiers.cli.eval import main
from verifiers.results import read_rows
from verifiers.testing import last_user_text

ECHO_V1 = """
import os

import verifiers.v1 as vf


class EchoData(vf.TaskData):
    answer: str


class EchoTask(vf.Task[EchoData]):
    @vf.reward
    def exact(self, trace) -> float:
        scale = float(os.environ.get("VF_TEST_SCALE", "1"))
        return float(trace.last_reply == self.data.answer) * scale

    @vf.reward(weight=0.5)
    def short(self, trace) -> float:
        return float(len(trace.last_reply) < 4)

    @vf.metric
    def reply_chars(self, trace) -> float:
        return float(len(trace.last_reply))


class EchoTaskset(vf.Taskset[EchoTask, vf.TasksetConfig]):
    def load(self):
        for i in range(4):
            answer = f"q{i}" if i % 2 else "other"
            yield EchoTask(EchoData(idx=i, prompt=f"q{i}", answer=answer), self.config.task)


__all__ = ["EchoTaskset"]
"""


@pytest.fixture
def echo_package(tmp_path, monkeypatch) -> Iterator[Path]:
    root = tmp_path / "pkgs"
    (root / "echo_v1").mkdir(parents=True)
    (root / "echo_v1" / "__init__.py").write_text(ECHO_V1)
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", str(root))
    yield root
    sys.modules.pop("echo_v1", None)


def runs(out: Path) -> list[Path]:
    return sorted((out / "evals").glob("*/*"))


def by_rollout(rows: list[dict]) -> dict[tuple[int, int], dict]:
    return {(r["example_id"], r["rollout_index"]): r for r in rows}


def rescore(source: Path, out: Path) -> Path:
    """``vf-eval echo-v1 --rescore source``: the new run's directory."""
    before = set(runs(out))
    assert main(["echo-v1", "--rescore", str(source), "--output-dir", str(out)]) == 0
    (new,) = set(runs(out)) - before
    return new


def test_a_rescored_v1_run_gives_back_its_recorded_scores_and_a_changed_reward_its_new_ones(
    server, tmp_path, echo_package, capsys, monkeypatch
):
    server.set_handler(last_user_text)  # echoes the prompt: odd tasks are right
    out = tmp_path / "out"
    argv = ["echo-v1", "-b", server.base_url, "-m", "m", "-n", "4", "-r", "2"]
    assert main([*argv, "--output-dir", str(out)]) == 0
    (source,) = runs(out)
    recorded = by_rollout(list(read_rows(source / "results.jsonl")))
    assert sorted(r["reward"] for r in recorded.values()) == [0.5] * 4 + [1.5] * 4
    calls = len(server.requests)
    capsys.readouterr()

    # the taskset as it ran: every reward and metric comes back, rows and traces alike
    same = rescore(source, out)
    printed = capsys.readouterr().out
    assert "re-scored 8 rollouts: reward changed on 0" in printed
    rows = by_rollout(list(read_rows(same / "results.jsonl")))
    assert rows.keys() == recorded.keys()
    for key, row in rows.items():
        assert row["reward"] == recorded[key]["reward"]
        assert row["metrics"] == recorded[key]["metrics"]
        assert (
            row["metrics"]["reply_chars"] == 2.0
            and row["completion"] == recorded[key]["completion"]
        )
    traces = [json.loads(line) for line in (same / "traces.jsonl").read_text().splitlines()]
    assert len(traces) == 8
    for line in traces:
        episode = vf.WireEpisode.model_validate(line)
        key = (line["example_id"], line["rollout_index"])
        assert episode.traces[0].reward == recorded[key]["reward"]
    meta = json.loads((same / "metadata.json").read_text())
    assert meta["rescored_from"] == str(source) and meta["status"] == "completed"

    # the reward changed (doubled): the new scores, and the table says what moved
    monkeypatch.setenv("VF_TEST_SCALE", "2")
    changed = rescore(source, out)
    printed = capsys.readouterr().out
    assert "re-scored 8 rollouts: reward changed on 4" in printed
    assert "1.0000" in printed and "1.5000" in printed  # recorded mean, mean now
    for key, row in by_rollout(list(read_rows(changed / "results.jsonl"))).items():
        old = recorded[key]
        assert row["metrics"]["exact"] == 2 * old["metrics"]["exact"]
        assert row["metrics"]["short"] == old["metrics"]["short"] == 1.0
        assert row["reward"] == 2 * old["metrics"]["exact"] + 0.5
    for line in (changed / "traces.jsonl").read_text().splitlines():
        trace = vf.WireEpisode.model_validate_json(line).traces[0]
        assert trace.rewards["exact"].score in (0.0, 2.0)
    assert len(server.requests) == calls  # no model call in either


def test_rescoring_a_v1_run_without_its_traces_is_refused_naming_the_file(
    server, tmp_path, echo_package, capsys
):
    server.set_handler(last_user_text)
    out = tmp_path / "out"
    argv = ["echo-v1", "-b", server.base_url, "-m", "m", "-n", "1", "-r", "1"]
    assert main([*argv, "--output-dir", str(out)]) == 0
    (source,) = runs(out)
    (source / "traces.jsonl").unlink()
    capsys.readouterr()
    assert main(["echo-v1", "--rescore", str(source), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert "has no traces.jsonl" in err and "re-scored from it" in err
