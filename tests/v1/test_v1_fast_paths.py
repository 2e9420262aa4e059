"""The short cuts a v1 rollout takes for CPU (``benchmarks/eval_throughput.py --table v1``)
give what the long way gives: a message's hash keys the graph the same for equal messages,
orjson-refused tool arguments included; a message goes on the wire as its pydantic dump; a
toolset's blank state outside a call is its own state type, one per toolset."""

from __future__ import annotations

import asyncio

import pytest

import verifiers.v1 as vf
from verifiers.v1 import graph
from verifiers.v1.chat import message_to_wire
from verifiers.v1.errors import ProviderError, RolloutError


def _call(arguments: str) -> vf.AssistantMessage:
    return vf.AssistantMessage(
        content=None, tool_calls=[vf.ToolCall(id="c0", name="f", arguments=arguments)]
    )


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ('{"b": 2, "a": 1}', '{"a":1,"b":2}'),
        ('{"a": NaN, "b": 1}', '{"b":1,"a":NaN}'),  # json reads NaN, orjson does not
        ('{"n": 123456789012345678901234567890}', '{ "n":123456789012345678901234567890 }'),
        ('{"a": "caf\\u00e9"}', '{"a":"café"}'),
    ],
)
def test_equivalent_tool_arguments_hash_equal_whichever_parser_reads_them(
    left: str, right: str
) -> None:
    assert graph.message_hash(_call(left)) == graph.message_hash(_call(right))


def test_different_messages_hash_apart() -> None:
    hashes = {
        graph.message_hash(m)
        for m in (
            _call('{"a": 1}'),
            _call('{"a": 2}'),
            _call('{"a": NaN}'),
            _call("not json"),
            vf.AssistantMessage(content="x", reasoning_content="r"),
            vf.AssistantMessage(content="x"),
            vf.UserMessage(content="x"),
            vf.ToolMessage(tool_call_id="c0", content="x"),
            vf.AssistantMessage(
                content="x", provider_state=[{"type": "reasoning", "data": 10**30}]
            ),
        )
    }
    assert len(hashes) == 9


def test_a_two_turn_tool_exchange_reuses_its_prefix_nodes() -> None:
    """The hashes ``prepare_turn`` computed key the nodes the commit adds: the next turn
    finds the whole previous conversation in the graph and adds only what is new."""
    trace = vf.Trace(
        agent=vf.AgentInfo(config=vf.AgentConfig()),
        task=vf.TraceTask(type="Task", data=vf.TaskData(idx=0, prompt="add")),
    )
    user = vf.UserMessage(content="add 2 and 3")
    call = _call('{"a": 2, "b": 3}')
    first = graph.prepare_turn(trace, [user])
    assert first.prefix_node_ids == []
    reply_id = first.commit(
        vf.Response(id="1", created=0, model="m", message=call, finish_reason="tool_calls")
    )
    tool = vf.ToolMessage(tool_call_id="c0", content="5", name="f")
    second = graph.prepare_turn(trace, [user, trace.nodes[reply_id].message, tool])
    assert second.prefix_node_ids == [0, reply_id]
    answer = vf.AssistantMessage(content="5")
    last = second.commit(
        vf.Response(id="2", created=0, model="m", message=answer, finish_reason="stop")
    )
    assert [n.parent for n in trace.nodes] == [None, 0, 1, 2]
    assert last == 3 and trace.last_reply == "5"
    # a trace read back rebuilds the same index from its nodes
    again = vf.Trace.model_validate_json(trace.model_dump_json())
    third = graph.prepare_turn(again, [user, call, tool, answer])
    assert third.prefix_node_ids == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "message",
    [
        vf.UserMessage(content="hi"),
        vf.SystemMessage(content="be brief"),
        vf.ToolMessage(tool_call_id="c0", content="5", name="add"),
        vf.ToolMessage(tool_call_id="c0", content="5"),
        vf.UserMessage(content=[vf.TextContentPart(text="look")]),
        vf.ToolMessage(tool_call_id="c0", content=[vf.TextContentPart(text="5")]),
    ],
)
def test_a_message_goes_on_the_wire_as_its_pydantic_dump(message: vf.Message) -> None:
    wire = message_to_wire(message)
    dump = message.model_dump(mode="json", exclude_none=True)
    assert wire == dump and list(wire) == list(dump)  # same keys, same order


class Counter(vf.State):
    calls: int = 0


class CountingToolset(vf.Toolset[vf.ToolsetConfig, Counter]):
    @vf.tool
    def bump(self) -> str:
        """Count a call."""
        self.state.calls += 1
        return str(self.state.calls)


def test_a_toolsets_state_outside_a_call_is_one_blank_of_its_state_type() -> None:
    toolset = CountingToolset(vf.ToolsetConfig(colocated=True))
    blank = toolset.state
    assert type(blank) is Counter and blank.calls == 0
    assert toolset.state is blank  # the same blank on every read
    assert CountingToolset().state is not blank  # each toolset its own
    [tool] = toolset.tools()
    assert tool.spec.description == "Count a call."
    rollout = Counter()
    assert asyncio.run(tool.call({}, rollout)) == "1"
    assert rollout.calls == 1 and blank.calls == 0  # a call writes the rollout's state


def test_an_episodes_and_a_traces_ids_are_version_4_uuids_as_uuid4_hex_makes_them() -> None:
    """``new_id`` skips the ``UUID`` object, not what ``uuid.uuid4().hex`` gives."""
    import uuid

    from verifiers.v1.episode import Episode
    from verifiers.v1.trace_parts import new_id

    ids = [new_id() for _ in range(2000)] + [Episode().id]
    assert len(set(ids)) == len(ids)
    for made in ids:
        parsed = uuid.UUID(hex=made)
        assert parsed.hex == made and len(made) == 32
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    assert {made[12] for made in ids} == {"4"} and {made[16] for made in ids} <= set("89ab")


@pytest.mark.parametrize(
    "raised",
    [ValueError("bad value"), TimeoutError(), ProviderError("the model fell over")],
)
def test_scoring_attributes_an_error_as_the_boundary_does(raised: Exception) -> None:
    """``Task.score`` catches without entering ``boundary``: the same error class and
    message come out (a ``RolloutError`` as it was raised)."""
    from verifiers.v1.errors import TaskError, boundary
    from verifiers.v1.trace_parts import AgentInfo, trace_task

    class Failing(vf.Task):
        @vf.reward
        def breaks(self) -> float:
            raise raised

    task = Failing(vf.TaskData(idx=0, prompt="p"))

    async def through_boundary() -> BaseException:
        try:
            async with boundary(TaskError, "task Failing scoring"):
                raise raised
        except Exception as e:
            return e
        raise AssertionError("boundary swallowed the error")

    async def through_score() -> BaseException:
        trace = vf.Trace(task=trace_task(task), agent=AgentInfo(config=vf.AgentConfig()))
        try:
            await task.score(trace)
        except Exception as e:
            assert trace.rewards == {"breaks": None}  # the reward stays due
            return e
        raise AssertionError("score swallowed the error")

    expected, got = asyncio.run(through_boundary()), asyncio.run(through_score())
    assert type(got) is type(expected) and str(got) == str(expected)
    assert got is raised if isinstance(raised, RolloutError) else got.__cause__ is raised


def test_a_pooled_model_call_takes_the_client_model_client_yields() -> None:
    from verifiers.v1.chat import ClientPool, model_client, pooled_client, using_pool
    from verifiers.v1.configs.client import EvalClientConfig

    config = EvalClientConfig()
    assert pooled_client(config, "http://127.0.0.1:9/v1", "k") is None  # no pool: none

    async def both() -> tuple[object, object]:
        pool = ClientPool()
        with using_pool(pool):
            async with model_client(config, "http://127.0.0.1:9/v1", "k") as yielded:
                return pooled_client(config, "http://127.0.0.1:9/v1", "k"), yielded

    pooled, yielded = asyncio.run(both())
    assert pooled is yielded is not None
