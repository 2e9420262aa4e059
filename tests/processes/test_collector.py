"""The collector's run policy (``verifiers.processes.collector``): held while a run's rollouts are in
flight, the same for a classic environment and a v1 taskset, undone however the run ends.

Each run reads the collector's settings from inside its rollouts (a weight-0 reward function
of a classic rubric, a ``@metric`` of a v1 task), so what is asserted is what a rollout saw."""

import asyncio
import gc
import sys

import pytest

import verifiers as vf
from verifiers.processes.collector import RUN_YOUNG_THRESHOLD

V1_TASKSET = """
import gc

import verifiers.v1 as vf


class EchoData(vf.TaskData):
    answer: str


class EchoTask(vf.Task[EchoData, vf.State, vf.TaskConfig]):
    @vf.reward
    def exact(self, trace) -> float:
        return float(trace.last_reply == self.data.answer)

    @vf.metric
    def young_threshold(self) -> float:
        return float(gc.get_threshold()[0])

    @vf.metric
    def frozen(self) -> float:
        return float(gc.get_freeze_count())


class EchoTaskset(vf.Taskset[EchoTask, vf.TasksetConfig]):
    def load(self):
        for i in range(3):
            yield EchoTask(EchoData(idx=i, prompt=f"q{i}", answer=f"q{i}"), self.config.task)


__all__ = ["EchoTaskset"]
"""


def exact(completion, answer) -> float:
    return float(completion[-1]["content"] == answer)


def young_threshold() -> float:
    return float(gc.get_threshold()[0])


def frozen() -> float:
    return float(gc.get_freeze_count())


def classic_env(n: int = 3, funcs: tuple = ()) -> vf.Environment:
    rows = [{"question": f"q{i}", "answer": f"q{i}"} for i in range(n)]
    rubric = vf.Rubric(
        funcs=[exact, young_threshold, frozen, *funcs], weights=[1.0, 0.0, 0.0] + [0.0] * len(funcs)
    )
    return vf.SingleTurnEnv(dataset=rows, rubric=rubric)


@pytest.fixture
def settings():
    """The collector's settings before the test, which each test must leave as they were (a
    frozen object freed by reference counting leaves the frozen count: it may only shrink)."""
    before = (gc.get_threshold(), gc.get_freeze_count(), gc.isenabled())
    yield before
    assert (gc.get_threshold(), gc.isenabled()) == (before[0], before[2])
    assert gc.get_freeze_count() <= before[1]


@pytest.fixture
def v1_env(tmp_path, monkeypatch):
    (tmp_path / "gc_echo_v1").mkdir()
    (tmp_path / "gc_echo_v1" / "__init__.py").write_text(V1_TASKSET)
    monkeypatch.syspath_prepend(str(tmp_path))
    from verifiers.v1.eval_env import TasksetEnvironment

    yield TasksetEnvironment("gc-echo-v1")
    sys.modules.pop("gc_echo_v1", None)


def test_a_classic_run_collects_with_the_run_policy_and_restores_it(server, client, settings):
    out = asyncio.run(classic_env().evaluate(client, "m", rollouts_per_example=2))
    assert out.reward == [1.0] * 6
    young = max(settings[0][0], RUN_YOUNG_THRESHOLD)
    assert out.metrics["young_threshold"] == [float(young)] * 6
    assert all(count > 0 for count in out.metrics["frozen"])  # the heap as the run began


def test_a_v1_run_collects_with_the_same_policy(server, v1_env, settings):
    out = asyncio.run(v1_env.evaluate(server.base_url, "m", rollouts_per_example=2))
    assert out.reward == [1.0] * 6
    young = max(settings[0][0], RUN_YOUNG_THRESHOLD)
    assert out.metrics["young_threshold"] == [float(young)] * 6
    assert all(count > 0 for count in out.metrics["frozen"])


def test_a_run_that_raises_restores_the_collector(server, client, settings):
    with pytest.raises(ValueError, match="rollouts_per_example"):
        asyncio.run(classic_env().evaluate(client, "m", rollouts_per_example=0))


def test_a_failing_rollout_and_a_cancelled_run_restore_the_collector(server, client, settings):
    def broken(completion) -> float:
        raise RuntimeError("scoring fails")

    out = asyncio.run(classic_env(funcs=(broken,)).evaluate(client, "m"))
    assert out.metrics["young_threshold"] == [float(max(settings[0][0], RUN_YOUNG_THRESHOLD))] * 3

    async def cancelled() -> None:
        started = asyncio.Event()

        async def hold(completion) -> float:
            started.set()
            await asyncio.sleep(30)
            return 0.0

        run = asyncio.ensure_future(classic_env(funcs=(hold,)).evaluate(client, "m"))
        await started.wait()
        assert gc.get_threshold()[0] == max(settings[0][0], RUN_YOUNG_THRESHOLD)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(cancelled())


def test_runs_side_by_side_hold_the_policy_until_the_last_one_ends(server, client, settings):
    """Run A is still scoring when run B ends: B leaves the policy to A, A undoes it."""

    async def both() -> tuple[float, float]:
        b_done = asyncio.Event()
        seen: list[float] = []

        async def after_b(completion) -> float:
            await b_done.wait()
            seen.append(gc.get_threshold()[0])
            return 0.0

        async def run_b() -> None:
            await classic_env(1).evaluate(client, "m")
            seen.append(gc.get_threshold()[0])  # between B's end and A's
            b_done.set()

        await asyncio.gather(classic_env(1, funcs=(after_b,)).evaluate(client, "m"), run_b())
        return seen[0], seen[1]

    between, in_a_after_b = asyncio.run(both())
    young = max(settings[0][0], RUN_YOUNG_THRESHOLD)
    assert between == young and in_a_after_b == young


def test_a_process_that_froze_its_heap_keeps_it_frozen(server, client):
    """An env worker forked with its heap frozen keeps it so (copy-on-write pages): a run there
    raises the threshold only."""
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        out = asyncio.run(classic_env().evaluate(client, "m"))
        # nothing more frozen by the run (frozen objects freed by reference counting leave it)
        assert all(0 < count <= before for count in out.metrics["frozen"])
        assert 0 < gc.get_freeze_count() <= before
    finally:
        gc.unfreeze()


def test_a_process_with_the_collector_disabled_is_left_alone(server, client, settings):
    gc.disable()
    try:
        out = asyncio.run(classic_env().evaluate(client, "m"))
        assert out.metrics["young_threshold"] == [float(settings[0][0])] * 3
        assert all(count <= settings[1] for count in out.metrics["frozen"])  # none frozen
        assert not gc.isenabled()
    finally:
        gc.enable()
