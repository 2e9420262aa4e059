"""Results on disk: layout, schema, streaming, interruption and resume."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.eval_runs import answers_then_holds

import verifiers as vf
from verifiers.errors import ResumeError
from verifiers.results import RolloutRecord, RunMetadata, new_run_dir, read_rows
from verifiers.testing import Reply


def exact(completion, answer):
    return float(completion[-1]["content"] == answer)


def make_env(n=6):
    return vf.SingleTurnEnv(
        dataset=[{"question": f"q{i}", "answer": f"q{i}"} for i in range(n)],
        rubric=vf.Rubric(funcs=[exact]),
        env_id="echo-env",
    )


def test_run_dir_layout(tmp_path):
    path = new_run_dir(tmp_path, "owner/my-env", "org/Model-7B")
    assert path.parent == tmp_path / "evals" / "owner--my-env--org--Model-7B"
    assert path.name != new_run_dir(tmp_path, "owner/my-env", "org/Model-7B").name


def test_a_model_name_too_long_for_a_directory_still_gets_a_run_dir_of_its_own(tmp_path):
    """A model id is whatever the endpoint lists or ``-m`` says: 300 characters made a name the
    filesystem refuses (vf-eval died with ENAMETOOLONG). It is cut with a hash of the whole, so
    two long names that share their start stay apart; a short name is kept as it is."""
    first, second = "m" * 300 + "-a", "m" * 300 + "-b"
    paths = [new_run_dir(tmp_path, "owner/my-env", model) for model in (first, second)]
    for path in paths:
        path.mkdir(parents=True)
        assert len(path.parent.name) <= 200 and path.parent.name.startswith("owner--my-env--mmm")
    assert paths[0].parent != paths[1].parent
    assert new_run_dir(tmp_path, "e", "m" * 150).parent.name == "e--" + "m" * 150


async def test_save_results_writes_schema_valid_rows_and_metadata(server, client, tmp_path):
    server.enqueue(Reply(status=400, error="bad"))
    out = await make_env(3).evaluate(
        client, "test/model", rollouts_per_example=2, save_results=True, output_dir=str(tmp_path)
    )
    run_dir = Path(out.path)
    assert run_dir.parent.name == "echo-env--test--model"
    rows = [RolloutRecord.model_validate(r) for r in read_rows(run_dir / "results.jsonl")]
    assert len(rows) == 6
    assert {(r.example_id, r.rollout_index) for r in rows} == {
        (i, j) for i in range(3) for j in range(2)
    }
    errored = [r for r in rows if r.error]
    assert len(errored) == 1 and errored[0].error.type == "BadRequestError"
    meta = RunMetadata.model_validate_json((run_dir / "metadata.json").read_text())
    assert meta.schema_version == 1 and meta.status == "completed"
    assert (
        meta.env_id == "echo-env" and meta.model == "test/model" and meta.rollouts_per_example == 2
    )
    assert meta.summary.num_rollouts == 6 and meta.summary.errors_by_type == {"BadRequestError": 1}
    assert meta.summary.avg_reward == pytest.approx(5 / 6)
    assert meta.summary.pass_at_k == {"1": pytest.approx(5 / 6), "2": 1.0}
    assert meta.summary.usage.completion_tokens > 0
    assert meta.verifiers_version == vf.__version__


async def test_state_columns_are_saved(server, client, tmp_path):
    await make_env(1).evaluate(
        client, "m", results_path=str(tmp_path / "r"), state_columns=["sampling_args", "trajectory"]
    )
    row = next(read_rows(tmp_path / "r" / "results.jsonl"))
    assert "sampling_args" in row and row["trajectory"][0]["completion"][0]["content"] == "q0"


async def test_resume_skips_complete_groups_and_reruns_partial_ones(server, client, tmp_path):
    run = tmp_path / "run"
    await make_env(3).evaluate(client, "m", rollouts_per_example=2, results_path=str(run))
    lines = (run / "results.jsonl").read_bytes().splitlines(keepends=True)
    # keep group 0 whole, half of group 1, and a torn line: as if killed mid-write
    by_group = {}
    for line in lines:
        by_group.setdefault(json.loads(line)["example_id"], []).append(line)
    (run / "results.jsonl").write_bytes(
        b"".join(by_group[0]) + by_group[1][0] + by_group[2][0][:25]
    )
    server.requests.clear()
    out = await make_env(3).evaluate(client, "m", rollouts_per_example=2, results_path=str(run))
    assert len(server.requests) == 4  # groups 1 and 2 rerun, group 0 skipped
    rows = list(read_rows(run / "results.jsonl"))
    assert sorted((r["example_id"], r["rollout_index"]) for r in rows) == [
        (i, j) for i in range(3) for j in range(2)
    ]
    assert len(out) == 6 and out.example_id == [0, 0, 1, 1, 2, 2]
    meta = RunMetadata.model_validate_json((run / "metadata.json").read_text())
    assert meta.resumed == 1 and meta.summary.num_rollouts == 6 and meta.status == "completed"


async def test_resume_with_different_settings_is_refused(server, client, tmp_path):
    run = tmp_path / "run"
    await make_env(2).evaluate(client, "m", rollouts_per_example=2, results_path=str(run))
    with pytest.raises(ResumeError, match="rollouts_per_example=2, now rollouts_per_example=3"):
        await make_env(2).evaluate(client, "m", rollouts_per_example=3, results_path=str(run))
    with pytest.raises(ResumeError, match="model="):
        await make_env(2).evaluate(client, "other", rollouts_per_example=2, results_path=str(run))


async def test_cancellation_saves_finished_groups_and_marks_interrupted(server, client, tmp_path):
    server.set_handler(lambda req: Reply(content=req["messages"][-1]["content"], delay=0.05))
    run = tmp_path / "run"
    four_done = asyncio.Event()

    def on_progress(done, total, records):
        if done >= 4:
            four_done.set()

    task = asyncio.ensure_future(
        make_env(40).evaluate(
            client, "m", max_concurrent=2, results_path=str(run), on_progress=on_progress
        )
    )
    await four_done.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    meta = RunMetadata.model_validate_json((run / "metadata.json").read_text())
    saved = list(read_rows(run / "results.jsonl"))
    assert meta.status == "interrupted" and 4 <= len(saved) < 40
    assert meta.summary.num_rollouts == len(saved)


RUNNER = textwrap.dedent(
    """
    import sys
    import verifiers as vf
    def exact(completion, answer):
        return float(completion[-1]["content"] == answer)
    env = vf.SingleTurnEnv(dataset=[{"question": f"q{i}", "answer": f"q{i}"} for i in range(40)],
                           rubric=vf.Rubric(funcs=[exact]), env_id="echo-env")
    env.evaluate_sync(sys.argv[1], "m", rollouts_per_example=2, max_concurrent=2, results_path=sys.argv[2])
    """
)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_killed_run_resumes_without_losing_or_duplicating(server, tmp_path, sig):
    # 10 groups answered, then the model waits: the run is still going when the stop lands
    server.set_handler(answers_then_holds(lambda req: req["messages"][-1]["content"], 20))
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, server.base_url, str(run)], stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 60
    while not (run / "results.jsonl").exists() or len(list(read_rows(run / "results.jsonl"))) < 10:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    os.kill(proc.pid, sig)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode != 0
    before = list(read_rows(run / "results.jsonl"))
    assert len(before) < 80
    status = json.loads((run / "metadata.json").read_text())["status"]
    assert status == ("interrupted" if sig == signal.SIGINT else "running")
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in stderr or proc.returncode in (-2, 130, 1)
    server.set_handler(lambda req: req["messages"][-1]["content"])
    subprocess.run(
        [sys.executable, "-c", RUNNER, server.base_url, str(run)], check=True, timeout=120
    )
    rows = list(read_rows(run / "results.jsonl"))
    keys = [(r["example_id"], r["rollout_index"]) for r in rows]
    assert len(keys) == len(set(keys)) == 80
    assert all(r["reward"] == 1.0 for r in rows)
    meta = json.loads((run / "metadata.json").read_text())
    assert (
        meta["status"] == "completed"
        and meta["resumed"] == 1
        and meta["summary"]["num_rollouts"] == 80
    )
