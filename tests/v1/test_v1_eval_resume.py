"""Resuming a v1 eval (``EvalConfig.resume``, upstream's ``--resume DIR``): a run whose
rollouts failed or never finished is run again in its own directory; its good episodes are
kept, only the owed rollouts reach the model, and ``traces.jsonl`` ends with each selected
task's rollouts exactly once, in process (``run_eval``), through an env server
(``run_eval_server``) and for a classic env under ``[legacy]`` (whole groups)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.v1_calc import calc_policy, install_calc, uppercase_reply

import verifiers.v1 as vf
from verifiers.errors import UsageError
from verifiers.testing import Reply
from verifiers.v1.cli.eval.runner import run_eval, run_eval_server
from verifiers.v1.configs.cli.eval import EvalConfig
from verifiers.v1.legacy import run_legacy_eval
from verifiers.v1.utils.loaders import load_environment


@pytest.fixture
def calc_package(tmp_path, monkeypatch) -> Iterator[Path]:
    yield from install_calc(tmp_path / "pkgs", monkeypatch)


def calc_config(base_url: str, out: Path, **more: Any) -> EvalConfig:
    """Both calc-v1 tasks, three rollouts each."""
    return EvalConfig.model_validate(
        {
            "env": {"taskset": {"id": "calc-v1"}, "agent": {"harness": {"id": "null"}}},
            "model": "test-model",
            "client": {"base_url": base_url},
            "num_rollouts": 3,
            "rich": False,
            "output_dir": str(out),
            "serve": {"pool": {"type": "static", "num_workers": 1}},
            **more,
        }
    )


def failing_second_task(request: dict) -> Reply | str:
    """calc_policy, but the endpoint refuses every call of the second task (10 + 20)."""
    if "10 + 20" in request["messages"][0]["content"]:
        return Reply(status=400, error="refused")
    return calc_policy(request)


def saved(out: Path) -> list[vf.WireEpisode]:
    lines = (out / "traces.jsonl").read_text().splitlines()
    return [vf.WireEpisode.model_validate_json(line) for line in lines]


def answers(episodes: list[Any]) -> Counter[str]:
    return Counter(e.traces[0].task.data.model_dump()["answer"] for e in episodes)


@pytest.mark.parametrize("path", ["in_process", "env_server"])
async def test_a_resumed_run_reruns_only_its_failed_and_torn_rollouts(
    server, calc_package, tmp_path, path
):
    run = run_eval_server if path == "env_server" else None
    out = tmp_path / "run"
    config = calc_config(server.base_url, out)

    async def evaluate(config: EvalConfig) -> list[Any]:
        if run is not None:
            return await run(config)
        return await run_eval(load_environment(config.env), config)

    server.set_handler(failing_second_task)
    first = await evaluate(config)
    assert [e.ok for e in first] == [True] * 3 + [False] * 3
    with (out / "traces.jsonl").open("a") as f:  # the run died writing a line
        f.write('{"id": "torn", "ok": tru')
    server.set_handler(calc_policy)
    server.requests.clear()
    resumed = await evaluate(config.model_copy(update={"resume": out}))
    # only the second task's three rollouts reached the model (four calls each)
    assert len(server.requests) == 12
    assert all("10 + 20" in r["messages"][0]["content"] for r in server.requests)
    assert all(e.ok for e in resumed) and answers(resumed) == {"5": 3, "30": 3}
    assert {e.id for e in resumed[:3]} == {e.id for e in first[:3]}  # kept, not rerun
    on_disk = saved(out)
    assert all(e.ok for e in on_disk) and answers(on_disk) == {"5": 3, "30": 3}
    assert {e.id for e in on_disk} == {e.id for e in resumed}
    # a complete run resumed: nothing owed, nothing asked, the same episodes
    server.requests.clear()
    again = await evaluate(config.model_copy(update={"resume": out}))
    assert not server.requests and {e.id for e in again} == {e.id for e in resumed}
    assert len(saved(out)) == 6


async def test_a_resumed_legacy_run_redoes_a_partly_failed_group_whole(server, tmp_path):
    """A classic rubric may score a group together: a group with one failed rollout runs
    again whole, a good group is kept."""
    out = tmp_path / "run"
    config = EvalConfig.model_validate(
        {
            "legacy": {"id": "uppercase"},
            "model": "scripted",
            "client": {"base_url": server.base_url},
            "num_tasks": 2,
            "num_rollouts": 2,
            "output_dir": str(out),
            "rich": False,
        }
    )
    server.set_handler(uppercase_reply)
    first = await run_legacy_eval(config)
    lines = (out / "traces.jsonl").read_text().splitlines()
    assert len(lines) == 4 and all(e.ok for e in first)
    # the second group's last rollout never finished (the run was killed mid-write)
    (out / "traces.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][:40])
    server.requests.clear()
    resumed = await run_legacy_eval(config.model_copy(update={"resume": out}))
    assert len(server.requests) == 2  # the second group, both rollouts
    ids = [e.traces[0].task.data.model_dump()["idx"] for e in resumed]
    assert ids == [0, 0, 1, 1] and {e.id for e in resumed[:2]} == {e.id for e in first[:2]}
    assert sorted(e.traces[0].task.data.model_dump()["idx"] for e in saved(out)) == [0, 0, 1, 1]


async def test_resume_refuses_a_directory_that_is_not_a_runs_or_another_output_dir(
    calc_package, tmp_path
):
    config = calc_config("http://127.0.0.1:9/v1", tmp_path / "elsewhere")
    with pytest.raises(UsageError, match=r"resume .* and output_dir .* differ"):
        await run_eval(load_environment(config.env), config.model_copy(update={"resume": tmp_path}))
    empty = config.model_copy(update={"resume": tmp_path, "output_dir": None})
    with pytest.raises(UsageError, match=r"no traces\.jsonl in"):
        await run_eval(load_environment(config.env), empty)
