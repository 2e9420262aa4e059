"""A state restored from a worker's snapshot shares what the state it came from shared: each
trajectory step's messages are the conversation's own message objects where the step's lists
are slices of it, equal tool definitions are one list, and a task equal to the row is a copy of
its top (not a second deep copy of the prompt). Memory a rollout the caller holds, not content:
every value reads as it was sent, and a step whose messages are not the conversation's (an
environment that rewrote its history) keeps its own."""

from __future__ import annotations

import copy

from verifiers.types import State
from verifiers.workers.protocol import pack, unpack
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
