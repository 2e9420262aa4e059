"""user-sim: a modeled user converses with the assistant under evaluation, over any taskset
(upstream 0.3.0's built-in env, the substrate of a tau2-style benchmark).

The task's prompt text is the user's scenario (in the user's system prompt, ``persona``); the
assistant plays the same task with its prompt nulled, so it learns the goal only through the
conversation, and the task's own rewards score its trace (they must read scoring fields, such
as ``answer``, not the prompt). The user is another agent on the tool-less ``null`` harness,
untrainable, who opens the conversation and ends it by replying with the done marker; its
``max_turns`` caps a run-away exchange. Both sides' traces land on the episode.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from verifiers.v1.agent import Agents
from verifiers.v1.configs.agent import AgentConfig
from verifiers.v1.configs.env import EnvConfig
from verifiers.v1.env import Env
from verifiers.v1.episode import Episode
from verifiers.v1.task import Task
from verifiers.v1.task_data import TaskData

PERSONA = """You are role-playing a USER talking to an AI assistant. This is your situation — what you want the ASSISTANT to do for you:

{scenario}

Rules:
- Open the conversation with your request, in your own words.
- Stay in character: short, natural user messages; never act as the assistant.
- The assistant does the work, not you: never perform the task yourself — any tool call, answer, or output format it asks for must come from the assistant; ask for it instead.
- Reveal details only when asked, as a real user would.
- When the assistant has fully met your goal — or you are convinced it cannot — reply with exactly {done} and nothing else."""

DONE = "###DONE###"
GREETING = "Hello! How can I help you today?"
"""What the assistant "says" when it answers the phone (on the user's side only)."""


class UserSimEnvConfig(EnvConfig):
    assistant: AgentConfig = AgentConfig()
    user: AgentConfig = AgentConfig(harness={"id": "null"}, max_turns=8)
    """The modeled user; its ``max_turns`` caps the conversation (``--env.user.max-turns``)."""
    persona: str = PERSONA
    """The user's system prompt: ``{scenario}`` becomes the task's prompt text and ``{done}``
    the done marker (plain replacement, so other braces in it are safe)."""
    done_marker: str = Field(DONE, min_length=1)
    """The user ends the conversation by replying with exactly this."""


class UserSimEnv(Env[UserSimEnvConfig]):
    async def setup(self, agents: Agents) -> None:
        # the user models the world the policy is evaluated against: never training data
        agents.user.trainable = False

    async def run(self, task: Task, agents: Agents) -> None:
        persona = self.config.persona.replace("{done}", self.config.done_marker)
        user_task: Task[Any, Any, Any] = Task(
            TaskData(
                idx=task.data.idx,
                prompt=None,  # the user opens through the interaction
                system_prompt=persona.replace("{scenario}", task.data.prompt_text),
            )
        )
        assistant_task = type(task)(task.data.model_copy(update={"prompt": None}), task.config)
        async with (
            agents.user.interaction(user_task) as sim,
            agents.assistant.interaction(assistant_task) as assistant,
        ):
            ask = await sim.turn(GREETING)
            while not ask.terminated and ask.last_reply.strip() != self.config.done_marker:
                answer = await assistant.turn(ask.last_reply)
                if answer.terminated:
                    break
                ask = await sim.turn(answer.last_reply)

    async def finalize(self, task: Task, episode: Episode[Any, Any, Any]) -> None:
        """How many turns the user took, on the assistant's trace (judgement stays with the
        task's rewards)."""
        (user,) = (t for t in episode.traces if t.agent is not None and t.agent.name == "user")
        for trace in episode.traces:
            if trace.agent is not None and trace.agent.name == "assistant":
                trace.record_metric("user_turns", float(user.num_turns))
