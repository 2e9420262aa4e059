"""``run_eval_server`` (upstream's env-server path for a v1 eval): a real ``vf-env-server`` of
the taskset started on loopback for the run, each rollout played in its workers, against the
scripted endpoint; the episodes and ``traces.jsonl`` are those of the same run in process
(``run_eval``), and the server is gone when the run returns."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from support.v1_calc import calc_policy, install_calc, uppercase_reply

import verifiers.v1 as vf
from verifiers.errors import UsageError
from verifiers.v1.cli.eval.runner import run_eval, run_eval_server
from verifiers.v1.configs.cli.eval import EvalConfig
from verifiers.v1.utils.loaders import load_environment

TIMES = ("id", "timestamp", "start", "end", "duration")


@pytest.fixture
def calc_package(tmp_path, monkeypatch) -> Iterator[Path]:
    yield from install_calc(tmp_path / "pkgs", monkeypatch)


def calc_config(base_url: str | None, out: Path, **more: Any) -> EvalConfig:
    """calc-v1's first task twice, through a one-worker server."""
    return EvalConfig.model_validate(
        {
            "env": {"taskset": {"id": "calc-v1"}, "agent": {"harness": {"id": "null"}}},
            "model": "test-model",
            "client": {"base_url": base_url},
            "num_tasks": 1,
            "num_rollouts": 2,
            "rich": False,
            "output_dir": str(out),
            "serve": {"pool": {"type": "static", "num_workers": 1}},
            **more,
        }
    )


def without_times(value: Any) -> Any:
    """An episode's JSON without what differs between two runs of one scripted model: its
    ids and clock readings."""
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k not in TIMES}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def env_servers() -> list[psutil.Process]:
    """This process's descendants running ``verifiers.cli.env_server``."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "verifiers.cli.env_server" in child.cmdline():
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


async def test_run_eval_server_gives_the_episodes_of_an_in_process_run(
    server, calc_package, tmp_path
):
    server.set_handler(calc_policy)
    config = calc_config(server.base_url, tmp_path / "local")
    local = await run_eval(load_environment(config.env), config)
    remote = await run_eval_server(config.model_copy(update={"output_dir": tmp_path / "remote"}))
    assert not env_servers()  # stopped with the run
    assert len(remote) == 2 and all(e.ok for e in remote)
    # the same transcript, tools, scores, task data and agent config (no vf-eval turn cap, no
    # engine sampling defaults)
    assert [without_times(e.model_dump(mode="json")) for e in remote] == [
        without_times(e.model_dump(mode="json")) for e in local
    ]
    trace = remote[0].traces[0]
    assert trace.task.data.model_dump()["answer"] == "5"
    assert trace.rewards["correct"] == vf.Reward(score=1.0) and trace.metrics["tool_calls"] == 1
    for side in ("local", "remote"):
        lines = (tmp_path / side / "traces.jsonl").read_text().splitlines()
        assert [vf.WireEpisode.model_validate_json(line).ok for line in lines] == [True, True]
        assert json.loads(lines[0])["env"]["id"] == "calc-v1"


async def test_run_eval_server_refuses_what_an_env_server_cannot_run(tmp_path):
    with pytest.raises(UsageError, match=r"needs client\.base_url"):
        await run_eval_server(calc_config(None, tmp_path))
    legacy = EvalConfig.model_validate(
        {
            "legacy": {"id": "uppercase", "extra_env_kwargs": {"max_turns": 3}},
            "client": {"base_url": "http://127.0.0.1:9/v1"},
            "rich": False,
        }
    )
    with pytest.raises(UsageError, match="extra_env_kwargs are set on an env in this process"):
        await run_eval_server(legacy)


async def test_run_eval_server_plays_a_legacy_env_in_its_workers_as_run_legacy_eval_does(
    server, tmp_path
):
    """Upstream's ``[legacy]`` block through the env server: the classic env's groups run in
    the server's workers, and the episodes are those of the in-process bridge."""
    from verifiers.v1.legacy import run_legacy_eval

    server.set_handler(uppercase_reply)
    config = EvalConfig.model_validate(
        {
            "legacy": {"id": "uppercase"},
            "model": "scripted",
            "client": {"base_url": server.base_url},
            "num_tasks": 3,
            "num_rollouts": 2,
            "rich": False,
            "serve": {"pool": {"type": "static", "num_workers": 1}},
        }
    )
    local = await run_legacy_eval(config.model_copy(update={"output_dir": tmp_path / "local"}))
    remote = await run_eval_server(config.model_copy(update={"output_dir": tmp_path / "remote"}))
    assert not env_servers()
    assert len(remote) == 6 and len(server.requests) == 12
    assert [without_times(e.model_dump(mode="json")) for e in remote] == [
        without_times(e.model_dump(mode="json")) for e in local
    ]
    assert [e.traces[0].task.data.model_dump()["idx"] for e in remote] == [0, 0, 1, 1, 2, 2]
    lines = (tmp_path / "remote" / "traces.jsonl").read_text().splitlines()
    assert sorted(vf.WireEpisode.model_validate_json(line).traces[0].reward for line in lines) == (
        sorted(e.traces[0].reward for e in remote)
    )
