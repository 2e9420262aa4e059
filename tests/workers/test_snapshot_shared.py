"""A state restored from a worker's snapshot shares what the state it came from shared: each
trajectory step's messages are the conversation's own message objects where the step's lists
are slices of it, equal tool definitions are one list, and a task equal to the row is a copy of
its top (not a second deep copy of the prompt). Memory a rollout the caller holds, not content:
every value reads as it was sent, and a step whose messages are not the conversation's (an
environment that rewrote its history) keeps its own."""

from __future__ import annotations

import asyncio
import copy
from types import SimpleNamespace

import pytest

from verifiers.clients.config import ClientConfig
from verifiers.types import State
from verifiers.workers.protocol import Response, RunGroupRequest, pack, unpack
from verifiers.workers.runner import WorkerGroups
from verifiers.workers.snapshot import restore, snapshot

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
    }
]


def tool_rollout(i: int, tools: list | None = None, rewrite_history: bool = False) -> State:
    """A finished two-call tool rollout as a worker holds it: its steps hold the conversation's
    own message dicts."""
    user = {"role": "user", "content": f"add 2 and {i}"}
    call = {
        "role": "assistant",
        "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "add", "arguments": "{}"}}
        ],
    }
    result = {"role": "tool", "tool_call_id": f"c{i}", "content": str(2 + i)}
    answer = {"role": "assistant", "content": str(2 + i)}
    row = {"question": user["content"], "answer": str(2 + i), "prompt": [user], "info": {}}
    state = State(input=row)
    second_prompt = [user, call, result]
    if rewrite_history:  # the environment sent the model a shortened history
        second_prompt = [{"role": "user", "content": "(summary)"}, result]
    state.update(
        task=dict(row),
        completion=[call, result, answer],
        trajectory=[
            {"prompt": [user], "completion": [call], "reward": None},
            {"prompt": second_prompt, "completion": [answer], "reward": None},
        ],
        tool_defs=copy.deepcopy(tools if tools is not None else TOOLS),
        reward=1.0,
    )
    return state


def over_the_wire(state: State) -> tuple[dict, State]:
    sent = unpack(pack(snapshot(state)))
    return copy.deepcopy(sent), restore(sent)


def test_steps_hold_the_conversations_own_messages():
    sent, back = over_the_wire(tool_rollout(1))
    conversation = [*back["input"]["prompt"], *back["completion"]]
    first, second = back["trajectory"]
    assert first["prompt"][0] is conversation[0] and first["completion"][0] is conversation[1]
    assert all(m is c for m, c in zip(second["prompt"], conversation[:3], strict=True))
    assert second["completion"][0] is conversation[3]
    # and they read as they were sent
    for step, raw in zip(back["trajectory"], sent["trajectory"], strict=True):
        assert step["prompt"] == raw["prompt"] and step["completion"] == raw["completion"]
        assert step["prompt"][-1].role == raw["prompt"][-1]["role"]
    # a step's list is its own list: changing one step's does not change the completion
    second["prompt"].append({"role": "user", "content": "more"})
    assert len(back["completion"]) == 3


def test_a_step_whose_messages_are_not_the_conversations_keeps_its_own():
    sent, back = over_the_wire(tool_rollout(2, rewrite_history=True))
    second = back["trajectory"][1]
    assert second["prompt"] == sent["trajectory"][1]["prompt"]
    conversation = [*back["input"]["prompt"], *back["completion"]]
    assert not any(m is c for m in second["prompt"] for c in conversation)
    # the step's completion is the conversation's slice after the step's prompt only when
    # the prompt was: here it is rebuilt on its own, equal to what was sent
    assert second["completion"] == sent["trajectory"][1]["completion"]


def test_equal_tool_definitions_are_one_list_and_other_ones_their_own():
    _, a = over_the_wire(tool_rollout(3))
    _, b = over_the_wire(tool_rollout(4))
    assert a["tool_defs"] == TOOLS and b["tool_defs"] is a["tool_defs"]
    other = copy.deepcopy(TOOLS)
    other[0]["function"]["name"] = "sub"
    _, c = over_the_wire(tool_rollout(5, tools=other))
    assert c["tool_defs"] == other and c["tool_defs"] is not a["tool_defs"]
    assert a["tool_defs"] == TOOLS  # never changed in place
    _, d = over_the_wire(tool_rollout(6))
    assert d["tool_defs"] == TOOLS


def test_a_task_equal_to_the_row_is_a_copy_of_its_top_and_another_task_its_own():
    sent, back = over_the_wire(tool_rollout(7))
    assert back["task"] == sent["task"] and back["task"] is not back["input"]
    back["task"]["answer"] = "changed"
    assert back["input"]["answer"] == "9"
    state = tool_rollout(8)
    state["task"] = {"name": "arith", "level": 2}
    sent, back = over_the_wire(state)
    assert back["task"] == {"name": "arith", "level": 2}


def test_asked_for_slices_a_step_travels_as_bounds_and_reads_back_the_same():
    state = tool_rollout(9)
    sent = unpack(pack(snapshot(state, step_slices=True)))
    first, second = sent["trajectory"]
    assert first["prompt_at"] == [0, 1] and first["completion_at"] == [1, 2]
    assert second["prompt_at"] == [0, 3] and second["completion_at"] == [3, 4]
    assert not {"prompt", "completion"} & (first.keys() | second.keys())
    back, copies = restore(sent), restore(unpack(pack(snapshot(state))))
    assert [(s["prompt"], s["completion"]) for s in back["trajectory"]] == [
        (s["prompt"], s["completion"]) for s in copies["trajectory"]
    ]
    conversation = [*back["input"]["prompt"], *back["completion"]]
    assert back["trajectory"][1]["prompt"][2] is conversation[2]
    # a step whose messages are not the rollout's own travels as copies, as before
    rewritten = unpack(pack(snapshot(tool_rollout(10, rewrite_history=True), step_slices=True)))
    assert "prompt" in rewritten["trajectory"][1] and "completion" in rewritten["trajectory"][1]
    assert restore(rewritten)["trajectory"][1]["prompt"][0]["content"] == "(summary)"


def long_rollout(turns: int) -> State:
    """A rollout of ``turns`` tool calls, each step's prompt the whole history before it."""
    user = {"role": "user", "content": "go"}
    state = State(input={"prompt": [user], "answer": "", "info": {}})
    history: list[dict] = [user]
    completion: list[dict] = []
    steps = []
    for turn in range(turns):
        call = {"role": "assistant", "content": f"turn {turn}"}
        steps.append({"prompt": list(history), "completion": [call], "reward": None})
        output = {"role": "tool", "tool_call_id": str(turn), "content": "x" * 500}
        history += [call, output]
        completion += [call, output]
    state.update(completion=completion, trajectory=steps, reward=0.0)
    return state


def test_a_long_rollouts_steps_cost_the_wire_their_bounds_not_their_history():
    state = long_rollout(30)
    copies, slices = pack(snapshot(state)), pack(snapshot(state, step_slices=True))
    assert len(slices) * 10 < len(copies)  # ~30 KB of history, not ~450 KB
    back = restore(unpack(slices))
    assert [s["prompt"] for s in back["trajectory"]] == [
        s["prompt"] for s in restore(unpack(copies))["trajectory"]
    ]
    assert len(back["trajectory"][-1]["prompt"]) == 1 + 2 * 29


def test_bounds_outside_the_conversation_are_refused_by_name():
    sent = unpack(pack(snapshot(tool_rollout(11), step_slices=True)))
    for bad in ([0, 99], [2, 1], [-1, 1], ["0", 1], [0]):
        broken = copy.deepcopy(sent)
        broken["trajectory"][0]["prompt_at"] = bad
        with pytest.raises(ValueError, match="not within its rollout's 4 messages"):
            restore(broken)


def test_an_output_the_caller_cannot_read_is_that_rollouts_error_not_the_runs_end():
    """A worker (another machine's vf-env-server, a newer one) whose output does not read:
    the rollout is recorded with the reason, its group's other rollouts as they came."""
    good = unpack(pack(snapshot(tool_rollout(12), step_slices=True)))
    bad = copy.deepcopy(good)
    bad["trajectory"][0]["prompt_at"] = [0, 99]

    class Answering:
        async def run_group(self, request: RunGroupRequest) -> Response:
            assert request.step_slices and request.output == "state"
            return Response(outputs=[good, bad, {**good, "trajectory": [5]}])

        async def close(self) -> None: ...

        def describe(self) -> dict:
            return {}

    rows = [{"prompt": [{"role": "user", "content": "q"}], "example_id": 0}] * 3
    job = SimpleNamespace(rows=rows, indices=[0, 1, 2], sampling_args=[{}] * 3, score=True)
    config = ClientConfig(api_base_url="http://127.0.0.1:9/v1")
    states = asyncio.run(WorkerGroups(Answering(), config, "m").run(job))
    assert states[0].get("error") is None and states[0]["reward"] == 1.0
    for state, reason in ((states[1], "not within"), (states[2], "int")):
        assert reason in str(state["error"]) and "could not be read" in str(state["error"])
        assert state["rollout_index"] in (1, 2) and state["reward"] == 0.0
