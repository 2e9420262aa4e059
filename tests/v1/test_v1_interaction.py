"""The user simulator: an env's ``run`` scripting the user of a rollout through
``agent.interaction(task)``, turn by turn, against the scripted endpoint (which repeats the
user's last words). Each turn returns only its own segment; closing the exchange ends the
trace as ``user_closed`` and scores it; a turn the exchange does not expect is refused."""

from __future__ import annotations

import pytest

import verifiers.v1 as vf
from verifiers.testing import Reply
from verifiers.v1.agent import Agent, Agents, ModelContext
from verifiers.v1.configs.harness import NullHarnessConfig

PHRASES = ["hello world", "goodbye world"]


class EchoData(vf.TaskData):
    phrases: list[str]


class EchoTask(vf.Task[EchoData, vf.State, vf.TaskConfig]):
    @vf.reward
    async def echoed(self, trace: vf.Trace) -> float:
        replies = [m.content or "" for m in trace.assistant_messages]
        hits = sum(p in r for p, r in zip(self.data.phrases, replies, strict=False))
        return hits / len(self.data.phrases)


class ScriptedUserEnv(vf.SingleAgentEnv):
    """The user opens the prompt-less task with the first phrase and answers with the rest."""

    segments: list[vf.Segment] = []

    async def run(self, task: vf.Task, agents) -> None:
        async with agents.agent.interaction(task) as interaction:
            for phrase in task.data.phrases:
                segment = await interaction.turn(phrase)
                type(self).segments.append(segment)
                if segment.terminated:
                    break


def agent(server, max_turns: int = 6) -> Agent:
    return Agent(
        "agent",
        vf.AgentConfig(harness=NullHarnessConfig(id="null"), max_turns=max_turns),
        ModelContext(base_url=server.base_url, model="test-model"),
    )


def echo_last(request: dict) -> str:
    return str(request["messages"][-1]["content"])


def task(prompt: str | None = None) -> EchoTask:
    return EchoTask(EchoData(idx=0, prompt=prompt, system_prompt="Repeat.", phrases=PHRASES))


async def test_a_scripted_user_drives_a_multi_turn_rollout_to_user_closed(server):
    server.set_handler(echo_last)
    ScriptedUserEnv.segments = []
    agents = Agents({"agent": agent(server)})
    await ScriptedUserEnv(vf.SingleAgentEnvConfig()).run(task(), agents)
    (trace,) = agents.traces
    assert trace.ok, trace.errors
    assert trace.num_turns == 2 and trace.stop_condition == "user_closed"
    assert trace.reward == 1.0
    assert [s.last_reply for s in ScriptedUserEnv.segments] == PHRASES
    assert all([m.role for m in s.messages] == ["assistant"] for s in ScriptedUserEnv.segments)
    # the second call saw the whole exchange: system, both user turns, the first reply
    roles = [m["role"] for m in server.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]


async def test_a_segment_holds_its_tool_calls_and_results(server):
    def tool_then_echo(request: dict) -> Reply | str:
        if request["messages"][-1]["role"] == "user":
            return Reply(tool_calls=[Reply.tool_call("missing_tool", {})])
        return "after the tool"

    server.set_handler(tool_then_echo)
    async with agent(server).interaction(task()) as interaction:
        segment = await interaction.turn([{"role": "user", "content": "go"}])
    assert [m.role for m in segment.messages] == ["assistant", "tool", "assistant"]
    assert "no tool named 'missing_tool'" in str(segment.messages[1].content)
    assert segment.last_reply == "after the tool" and not segment.terminated
    assert interaction.trace.stop_condition == "user_closed"


async def test_a_turn_after_the_turn_limit_is_terminated_and_then_refused(server):
    server.set_handler(echo_last)
    async with agent(server, max_turns=1).interaction(task()) as interaction:
        first = await interaction.turn("hello world")
        assert first.last_reply == "hello world" and not first.terminated
        second = await interaction.turn("goodbye world")
        assert second.terminated and second.messages == []
        with pytest.raises(RuntimeError, match="the exchange is over"):
            await interaction.turn("again")
    assert interaction.trace.stop_condition == "max_turns"
    assert interaction.trace.reward == 0.5


async def test_turns_the_exchange_does_not_expect_are_refused(server):
    server.set_handler(echo_last)
    async with agent(server).interaction(task()) as interaction:
        with pytest.raises(ValueError, match="needs the user's next message"):
            await interaction.turn()
    with pytest.raises(RuntimeError, match="this interaction is closed"):
        await interaction.turn("late")
    async with agent(server).interaction(task("hello world")) as prompted:
        with pytest.raises(ValueError, match="the task's prompt opens this exchange"):
            await prompted.turn("hello world")
        opening = await prompted.turn()
        assert opening.last_reply == "hello world"
    assert prompted.trace.num_turns == 1
    closed = await prompted.close()  # idempotent: scored once
    assert closed is prompted.trace and closed.stop_condition == "user_closed"
