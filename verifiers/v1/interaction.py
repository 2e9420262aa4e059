"""A rollout held open turn by turn (``Agent.interaction``) and what each turn produced.

``Interaction`` is what ``agent.interaction(task)`` yields and what ``agent.run(task)`` drives
for one segment; ``Segment`` is one turn's replies and tool results. The agent opens the
interaction (trace, tools, runtime, the task's setup) and finishes it (finalize, score,
release); see ``verifiers.v1.agent``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import TypeAdapter

from verifiers.v1.types import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage

if TYPE_CHECKING:
    from contextlib import AsyncExitStack

    from verifiers.v1.runtimes.base import Runtime
    from verifiers.v1.task import Task
    from verifiers.v1.toolset import BoundTool
    from verifiers.v1.trace import Trace


def prompt_messages(task: Task) -> list[Message]:
    data = task.data
    messages: list[Message] = []
    if data.system_prompt:
        messages.append(SystemMessage(content=data.system_prompt))
    if isinstance(data.prompt, str):
        messages.append(UserMessage(content=data.prompt))
    elif data.prompt:
        messages.extend(data.prompt)
    return messages


@dataclass(frozen=True)
class Segment:
    """What one ``Interaction.turn`` produced: the assistant replies and tool results of that
    segment, in order. ``terminated`` means the rollout ended (an error, a stop hook, a turn
    limit) instead of answering; such a segment carries no messages, the trace holds them."""

    messages: list[Message]
    terminated: bool = False

    @property
    def last_reply(self) -> str:
        """The text of the segment's last assistant message (empty when it has none)."""
        for message in reversed(self.messages):
            if isinstance(message, AssistantMessage):
                return (message.content or "").strip()
        return ""


_MESSAGE = TypeAdapter(Message)


class Seat(Protocol):
    """What an interaction needs of its agent (``verifiers.v1.agent.Agent``)."""

    async def converse(
        self,
        task: Task,
        trace: Trace,
        messages: list[Message],
        tools: list[BoundTool],
        runtime: Runtime | None = None,
    ) -> list[Message]: ...

    async def finish_interaction(self, interaction: Interaction) -> None: ...


class Interaction:
    """A rollout held open turn by turn: the caller is the run's user (a scripted user, the
    user simulator of an env's ``run``). ``turn("...")`` adds one user turn and runs the
    harness until it yields; a prompted task speaks first (take its reply with a bare
    ``turn()``), a prompt-less one is opened by the first ``turn(message)``. Leaving
    ``agent.interaction(task)`` (or ``close()``) ends the exchange as ``user_closed`` and
    scores the rollout."""

    def __init__(
        self,
        agent: Seat,
        task: Task,
        trace: Trace,
        tools: list[BoundTool],
        runtime: Runtime | None = None,
    ) -> None:
        self.agent, self.task, self.trace, self.tools = agent, task, trace, tools
        self.runtime = runtime
        self.messages: list[Message] = prompt_messages(task)
        self.closed = False
        self._started = False  # a segment has run
        self._over = False  # a terminated segment was delivered
        self._lock: asyncio.Lock | None = None
        """One caller at a time (``turn``, ``close``); made by the first (``Agent.run``'s
        rollout has none held across its model calls for the collector to walk)."""
        self._ready = False
        """The task's setup ran: closing finalizes and scores (``Agent.finish_interaction``)."""
        self._servers: AsyncExitStack | None = None
        """The rollout's MCP sessions and launched tool servers, closed on release."""

    def _one_caller(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def turn(
        self, message: str | list[Message] | list[dict[str, Any]] | None = None
    ) -> Segment:
        """Send one user turn (text, or messages typed or as wire dicts) and run one segment.
        Turns strictly alternate: one caller at a time."""
        async with self._one_caller():
            if self.closed:
                raise RuntimeError("this interaction is closed; read interaction.trace")
            if self._over:
                raise RuntimeError("the exchange is over (the run ended); read interaction.trace")
            prompted = not self._started and self.task.data.prompt is not None
            if message is None and not prompted:
                raise ValueError(
                    "nothing to run a turn on: a bare turn() takes a prompted task's opening "
                    "reply; this exchange needs the user's next message"
                )
            if message is not None and prompted:
                raise ValueError(
                    "the task's prompt opens this exchange: take its first reply with a bare "
                    "turn() before answering (or give the task prompt=None to open it yourself)"
                )
            if isinstance(message, str):
                added: list[Message] = [UserMessage(content=message)]
            else:
                added = [
                    _MESSAGE.validate_python(m) if isinstance(m, dict) else m for m in message or []
                ]
            return await self._segment(added)

    async def _segment(self, added: list[Message]) -> Segment:
        self._started = True
        turns_before = self.trace.num_turns
        if not self.trace.is_completed:
            self.messages = [*self.messages, *added]
            before = len(self.messages)
            try:
                self.messages = await self.agent.converse(
                    self.task, self.trace, self.messages, self.tools, self.runtime
                )
            except Exception as e:
                self.trace.record_error(e)
            if self.trace.num_turns > turns_before:
                # answered, even if a limit then ended it: that is the next turn's news
                produced: list[Message] = [
                    m
                    for m in self.messages[before:]
                    if isinstance(m, AssistantMessage | ToolMessage)
                ]
                return Segment(messages=produced)
        self._over = True
        return Segment(messages=[], terminated=True)

    async def close(self) -> Trace:
        """End the exchange and finish the rollout: scoring and hooks run once, however
        often this is called; the finished trace."""
        async with self._one_caller():
            if not self.closed:
                self.closed = True
                if self._ready:
                    await self.agent.finish_interaction(self)
        return self.trace
