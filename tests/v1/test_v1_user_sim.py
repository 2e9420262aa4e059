"""The built-in ``user-sim`` env (upstream's ``--env.id user-sim``): a modeled user (a second
agent on the scripted endpoint, told the task's prompt as its scenario) converses with the
assistant, who sees no prompt; the task's own reward scores the assistant's trace; both traces
land on the episode, the user's untrainable. Run through ``run_eval`` by env id."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest

from verifiers.v1.cli.eval.runner import run_eval
from verifiers.v1.cli.output import read_episodes
from verifiers.v1.configs.cli.eval import EvalConfig
from verifiers.v1.envs.user_sim import UserSimEnv
from verifiers.v1.trace import WireTrace
from verifiers.v1.utils.loaders import load_environment

WORDS = """
import verifiers.v1 as vf


class WordData(vf.TaskData):
    answer: str


class WordTask(vf.Task[WordData]):
    @vf.reward
    async def said_it(self, trace) -> float:
        return float(self.data.answer in (trace.last_reply or ""))


class WordTaskset(vf.Taskset[WordTask, vf.TasksetConfig]):
    def load(self):
        return [WordTask(WordData(idx=0, prompt="Get the assistant to say banana.", answer="banana"))]


__all__ = ["WordTaskset"]
"""


@pytest.fixture
def words(tmp_path, monkeypatch) -> Iterator[ModuleType]:
    (tmp_path / "say_words.py").write_text(WORDS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}")
    import say_words

    yield say_words
    sys.modules.pop("say_words", None)


def user_or_assistant(done_when_said: bool):
    """The user (its system prompt is the persona) asks for banana until it hears it, then
    says the done marker (or, with ``done_when_said`` False, never does); the assistant says
    banana once asked for it."""

    def reply(request: dict) -> str:
        messages = request["messages"]
        last = messages[-1]["content"]
        if messages[0]["role"] == "system" and "role-playing a USER" in messages[0]["content"]:
            return "###DONE###" if done_when_said and "banana" in last else "Please say banana."
        return "banana" if "banana" in last else "How can I help?"

    return reply


def config(base_url: str, out, user: dict | None = None) -> EvalConfig:
    return EvalConfig.model_validate(
        {
            "env": {
                "id": "user-sim",
                "taskset": {"id": "say-words"},
                "assistant": {"harness": {"id": "null"}, "max_turns": 6},
                **({"user": user} if user else {}),
            },
            "model": "test-model",
            "client": {"base_url": base_url},
            "output_dir": str(out),
            "rich": False,
        }
    )


async def test_a_modeled_user_opens_the_conversation_and_the_assistants_trace_is_scored(
    server, words, tmp_path
):
    server.set_handler(user_or_assistant(done_when_said=True))
    cfg = config(server.base_url, tmp_path / "out")
    env = load_environment(cfg.env)
    assert isinstance(env, UserSimEnv)
    (episode,) = await run_eval(env, cfg)
    assert episode.ok, episode.errors
    traces = {t.agent.name: t for t in episode.traces}
    assert sorted(traces) == ["assistant", "user"]
    assistant, user = traces["assistant"], traces["user"]
    assert user.agent.trainable is False and assistant.agent.trainable is True
    # the scenario is the user's knowledge: in its system prompt, never shown to the assistant
    first_user_request = server.requests[0]["messages"]
    assert "Get the assistant to say banana." in first_user_request[0]["content"]
    assert first_user_request[-1]["content"] == "Hello! How can I help you today?"
    assistant_requests = [
        r for r in server.requests if "role-playing a USER" not in r["messages"][0]["content"]
    ]
    assert all(
        "Get the assistant" not in str(m["content"])
        for r in assistant_requests
        for m in r["messages"]
    )
    assert assistant_requests[0]["messages"] == [{"role": "user", "content": "Please say banana."}]
    assert assistant.reward == 1.0 and assistant.last_reply == "banana"
    assert assistant.stop_condition == "user_closed"
    assert assistant.metrics["user_turns"] == float(user.num_turns) == 2.0
    # one saved episode holds both sides, read back without importing the taskset
    (record,) = read_episodes(tmp_path / "out", WireTrace)
    assert record.id == episode.id
    assert {t.agent.name for t in record.traces} == {"assistant", "user"}
    assert next(t for t in record.traces if t.agent.name == "assistant").task.data.prompt is None


async def test_a_user_that_never_says_done_is_stopped_by_its_own_turn_cap(server, words, tmp_path):
    server.set_handler(user_or_assistant(done_when_said=False))
    cfg = config(
        server.base_url, tmp_path / "out", user={"harness": {"id": "null"}, "max_turns": 3}
    )
    (episode,) = await run_eval(load_environment(cfg.env), cfg)
    traces = {t.agent.name: t for t in episode.traces}
    assert traces["user"].num_turns == 3 and traces["user"].stop_condition == "max_turns"
    assert traces["assistant"].reward == 1.0  # scored as usual after the cap ended the talk
