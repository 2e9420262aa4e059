"""The classic verifiers API through the real HTTP path: client objects, result shapes, State,
the error hierarchy, final_env_response (the module paths: tests/classic/test_classic_surface.py)."""

from __future__ import annotations

import copy
import pickle

import httpx
import pytest
from openai import AsyncOpenAI, OpenAI
from openai.types.chat import ChatCompletion

import verifiers as vf
from verifiers.testing import Reply

# These tests hold the SDK to the verifiers 0.1.8 contract (message dicts, ``oai_tools``,
# ChatCompletion replies); tests/classic/test_typed_api.py covers the same paths for 0.1.11+.
pytestmark = pytest.mark.usefixtures("dict_era")


def rows(n=2):
    return [{"question": f"q{i}", "answer": f"q{i}"} for i in range(n)]


def exact(completion, answer) -> float:
    return float(completion[-1]["content"] == answer)


async def test_a_subclassed_client_is_called_through_its_own_create(server):
    calls = []

    class Tracing(AsyncOpenAI):
        pass

    client = Tracing(base_url=server.base_url, api_key="k", default_headers={"X-Team": "rl"})
    original = client.chat.completions.create

    async def create(**kwargs):
        calls.append(kwargs)
        return await original(**kwargs)

    client.chat.completions.create = create
    env = vf.SingleTurnEnv(dataset=rows(), rubric=vf.Rubric(funcs=[exact]))
    out = await env.evaluate(client, "m")
    assert out["reward"] == [1.0, 1.0] and len(calls) == 2
    # the provider's own reply objects are kept on the trajectory
    assert isinstance(out["state"][0]["trajectory"][0]["response"], ChatCompletion)
    assert all(r.get("model") == "m" for r in server.requests)


async def test_a_custom_http_client_is_used_not_bypassed(server):
    seen = []

    async def hook(request: httpx.Request) -> None:
        seen.append(request.headers.get("x-trace"))

    http_client = httpx.AsyncClient(event_hooks={"request": [hook]}, headers={"X-Trace": "on"})
    client = AsyncOpenAI(base_url=server.base_url, api_key="k", http_client=http_client)
    env = vf.SingleTurnEnv(dataset=rows(3), rubric=vf.Rubric(funcs=[exact]))
    out = await env.evaluate(client, "m")
    assert out.reward == [1.0] * 3 and seen == ["on"] * 3
    await http_client.aclose()


async def test_a_test_double_and_a_sync_client_work_like_a_real_one(server):
    class Double:
        def __init__(self):
            self.chat = type("Chat", (), {})()
            self.chat.completions = self

        async def create(self, model, messages, **kwargs):
            return {
                "choices": [{"message": {"role": "assistant", "content": messages[-1]["content"]}}]
            }

    env = vf.SingleTurnEnv(dataset=rows(), rubric=vf.Rubric(funcs=[exact]))
    assert (await env.evaluate(Double(), "m")).reward == [1.0, 1.0]
    sync = OpenAI(base_url=server.base_url, api_key="k")
    assert env.evaluate_sync(sync, "m").reward == [1.0, 1.0]


async def test_client_errors_are_typed_data_on_the_rollout(server):
    server.set_handler(lambda req: Reply(status=400, error="bad request body"))
    client = AsyncOpenAI(
        base_url=server.base_url, api_key="k", max_retries=0, http_client=httpx.AsyncClient()
    )
    env = vf.SingleTurnEnv(dataset=rows(1))
    out = await env.evaluate(client, "m")
    error = out.state[0]["error"]
    assert isinstance(error, vf.ModelError) and isinstance(error, vf.Error)
    assert error["type"] == "BadRequestError" and out.state[0]["stop_condition"] == "has_error"


async def test_generate_outputs_read_as_mapping_and_attributes_with_metadata(server, client):
    env = vf.SingleTurnEnv(dataset=rows(3), rubric=vf.Rubric(funcs=[exact]), env_id="echo")
    out = await env.evaluate(client, "m", rollouts_per_example=2)
    assert out["reward"] is out.reward and len(out) == 6
    meta = out["metadata"]  # filled without saving, under classic and new names
    assert meta["avg_reward"] == 1.0 and meta.avg_reward == 1.0 and meta["env_id"] == "echo"
    assert meta["num_examples"] == 3 and meta["rollouts_per_example"] == 2
    assert meta.summary.num_rollouts == 6 and meta["time_ms"] > 0
    assert set(out.state[0]["timing"]) >= {"start_time", "generation_ms", "scoring_ms", "total_ms"}


async def test_classic_inputs_repeated_per_rollout_form_one_group(server, client):
    env = vf.SingleTurnEnv(dataset=rows(2), rubric=vf.Rubric(funcs=[exact]))
    inputs = env.get_eval_inputs(num_examples=2, rollouts_per_example=3)
    assert len(inputs) == 6
    out = await env.generate(inputs, client, "m")
    assert out.example_id == [0, 0, 0, 1, 1, 1]
    assert sorted(s["rollout_index"] for s in out.state[:3]) == [0, 1, 2]


def test_state_is_one_mapping_whatever_the_access_path():
    state = vf.State(input={"prompt": [], "answer": "a", "task": "t", "info": {}, "example_id": 3})
    state.update({"answer": "b", "reward": 1.0})
    assert (
        state["answer"] == "b"
        and state["input"]["answer"] == "b"
        and "answer" not in dict.keys(state)
    )
    assert (
        state.get("answer") == "b" and "answer" in state and state.setdefault("answer", "z") == "b"
    )
    assert dict(state)["answer"] == "b" and set(state) >= {"prompt", "answer", "reward", "input"}
    assert len(state) == len(list(state)) and dict(state.items()) == dict(state)
    assert state.pop("reward") == 1.0 and "reward" not in state
    for twin in (copy.copy(state), copy.deepcopy(state), pickle.loads(pickle.dumps(state))):
        assert twin == state and "answer" not in dict.keys(twin)
    del state["task"]
    assert "task" not in state and "task" not in state["input"]


async def test_final_env_response_ends_the_rollout_and_joins_the_completion(server, client):
    class OneQuestion(vf.MultiTurnEnv):
        async def env_response(self, messages, state, **kwargs):
            reply = [{"role": "user", "content": "correct, done"}]
            state["final_env_response"] = reply
            return reply

    with vf.written_for("0.1.9"):  # final_env_response and num_turns arrived in 0.1.9
        env = OneQuestion(dataset=rows(1), max_turns=5)
    out = await env.evaluate(client, "m")
    state = out.state[0]
    assert len(state["trajectory"]) == 1 and len(server.requests) == 1
    assert state["stop_condition"] == "has_final_env_response"
    assert state["completion"][-1] == {"role": "user", "content": "correct, done"}
    assert state["metrics"]["num_turns"] == 1.0 and state["trajectory_id"]


async def test_both_classic_get_model_response_signatures(server, client):
    env = vf.SingleTurnEnv(dataset=rows(1))
    prompt = [{"role": "user", "content": "hi"}]
    old = await env.get_model_response(client=client, model="m", prompt=prompt)
    state = await env.init_state({"prompt": prompt, "example_id": 0}, client, "m")
    new = await env.get_model_response(state, prompt)
    assert old["choices"][0]["message"]["content"] == new.choices[0].message.content == "hi"


def test_tool_env_tools_are_plain_assignable_attributes():
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: first
            b: second
        """
        return a + b

    class Remote(vf.ToolEnv):  # an MCP-style env fills the tool lists itself
        def __init__(self, **kwargs):
            super().__init__(tools=[], **kwargs)
            self.tools = [add]
            self.tool_map = {"add": add}
            self.oai_tools = [vf.ToolEnv(tools=[add], dataset=rows(1)).oai_tools[0]]

    env = Remote(dataset=rows(1))
    assert env.oai_tools[0]["function"]["parameters"]["required"] == ["a", "b"]
    assert env.oai_tools[0]["function"]["parameters"]["title"] == "add_args"
