"""A group of one rollout (``rollouts_per_example=1``, the default) is generated and scored in
place, without a task and a gather for its one member (``LocalGroups._generate``,
``Rubric._call_each``): the same states, rewards, metrics and recorded reward errors as a
group of several, whose members still run and are scored concurrently."""

from __future__ import annotations

import asyncio

import verifiers as vf
from verifiers.types import State


def exact(completion, answer) -> float:
    return float(completion[-1]["content"] == answer)


async def length(completion) -> float:
    await asyncio.sleep(0)
    return float(len(completion[-1]["content"]))


async def broken(completion) -> float:
    raise ValueError("reward broke")


def rows(n: int) -> list[dict]:
    return [{"question": f"q{i}", "answer": f"q{i}"} for i in range(n)]


async def test_groups_of_one_read_as_groups_of_several(server):
    env = vf.SingleTurnEnv(
        dataset=rows(3), rubric=vf.Rubric(funcs=[exact, length, broken], weights=[1, 0, 0])
    )
    one = await env.evaluate(server.base_url, "m", rollouts_per_example=1)
    two = await env.evaluate(server.base_url, "m", rollouts_per_example=2)
    assert len(one.state) == 3 and len(two.state) == 6
    for state in [*one.state, *two.state]:
        assert state["reward"] == 1.0  # the echo server repeats the question: exact
        assert state["metrics"]["length"] == 2.0 and state["metrics"]["broken"] == 0.0
        assert [e["type"] for e in state["reward_errors"]] == ["ValueError"]
        assert state["error"] is None and state["completion"][-1]["content"] == state["answer"]
    assert [s["rollout_index"] for s in one.state] == [0, 0, 0]
    assert [s["rollout_index"] for s in two.state] == [0, 1] * 3


async def test_the_async_reward_functions_of_a_larger_group_still_run_together():
    both = asyncio.Event()
    seen: list[str] = []

    async def meets(answer) -> float:
        # each waits until the other has started: scored one after the other, it never ends
        seen.append(answer)
        if len(seen) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 30)
        return 1.0

    rubric = vf.Rubric(funcs=[meets])
    states = [_state(a) for a in ("a", "b")]
    await rubric.score_group(states)
    assert [s["reward"] for s in states] == [1.0, 1.0]
    lone = [_state("c")]
    await vf.Rubric(funcs=[length]).score_group(lone)
    assert lone[0]["reward"] == 1.0 and lone[0]["metrics"] == {"length": 1.0}


def _state(answer: str) -> State:
    state = State(input={"prompt": [], "answer": answer, "example_id": 0})
    state["completion"] = [{"role": "assistant", "content": answer}]
    return state
