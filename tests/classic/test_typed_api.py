"""The classic API of verifiers 0.1.11-0.3.x through the real HTTP path: typed messages read
both ways, tool environments, every client API, the release an environment runs as, and the
shapes results come back in."""

from __future__ import annotations

import json

import pytest

import verifiers as vf
from verifiers.classic.releases import from_requirements, lower_bound
from verifiers.testing import ModelServer, Reply, conversation


def rows(n=2):
    return [{"question": f"q{i}", "answer": f"q{i}"} for i in range(n)]


def by_attribute(completion, answer) -> float:
    """Written as 0.1.11+ environments write it: messages are objects."""
    last = completion[-1]
    return float(getattr(last, "role", "") == "assistant" and last.content == answer)


def by_key(completion, answer) -> float:
    """Written as 0.1.x environments write it: messages are dicts."""
    return float(completion[-1]["role"] == "assistant" and completion[-1].get("content") == answer)


async def test_messages_read_as_objects_and_as_dicts(server, client):
    env = vf.SingleTurnEnv(dataset=rows(), rubric=vf.Rubric(funcs=[by_attribute, by_key]))
    out = await env.evaluate(client, "m")
    assert out.metrics == {
        "by_attribute": [1.0, 1.0],
        "by_key": [1.0, 1.0],
        "num_turns": [1.0, 1.0],
    }
    message = out.state[0]["completion"][0]
    assert isinstance(message, vf.AssistantMessage)
    assert message == {"role": "assistant", "content": "q0"}  # None fields count as absent
    assert dict(message) == {"role": "assistant", "content": "q0"}
    assert isinstance(out.state[0]["prompt"][0], vf.UserMessage)
    assert isinstance(out.state[0]["trajectory"][0]["response"], vf.Response)


def test_a_typed_message_is_also_a_mapping_of_its_wire_fields():
    call = vf.ToolCall(id="c1", name="lookup", arguments='{"q": 1}')
    message = vf.AssistantMessage(content=None, tool_calls=[call])
    assert message.tool_calls[0].name == "lookup" and message["tool_calls"][0]["name"] == "lookup"
    assert call["function"]["name"] == "lookup" and call.type == "function"  # the OpenAI shape too
    assert "content" in message and message.get("reasoning_content", "x") is None
    openai_shape = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"q": 1}'},
            }
        ],
    }
    assert message == openai_shape
    assert vf.SystemMessage(content="be brief") == {"role": "system", "content": "be brief"}


def square(x: int) -> int:
    """Square a number.

    Args:
        x: The number.
    """
    return x * x


def tool_then_answer(request):
    messages = conversation(request)
    if messages[-1]["role"] == "tool":
        return f"The answer is {messages[-1]['content']}."
    return Reply(content=None, tool_calls=[Reply.tool_call("square", {"x": 7}, call_id="call_7")])


async def test_tool_env_sends_what_0_1_11_sends_and_reads_tool_calls_as_objects(server, client):
    seen = []

    class Watching(vf.ToolEnv):
        async def env_response(self, messages, state, **kwargs):
            call = messages[-1].tool_calls[0]
            seen.append((call.id, call.name, json.loads(call.arguments)))
            return await super().env_response(messages, state, **kwargs)

    server.set_handler(tool_then_answer)
    env = Watching(tools=[square], dataset=rows(1), max_turns=3)
    assert isinstance(env.tool_defs[0], vf.Tool) and env.tool_defs[0].strict is True
    out = await env.evaluate(client, "m")
    assert seen == [("call_7", "square", {"x": 7})]
    state = out.state[0]
    assert [m.role for m in state["completion"]] == ["assistant", "tool", "assistant"]
    assert state["completion"][1] == vf.ToolMessage(content="49", tool_call_id="call_7")
    assert out.metrics["total_tool_calls"] == [1.0] and out.metrics["square_calls"] == [1.0]
    first, second = server.requests
    assert first["tools"][0]["function"]["name"] == "square"
    assert first["tools"][0]["function"]["strict"] is True
    # a tool-call turn goes back with content null, as verifiers 0.1.11+ sends it
    assistant = second["messages"][1]
    assert assistant["content"] is None and assistant["tool_calls"][0]["id"] == "call_7"
    assert second["messages"][2] == {"role": "tool", "tool_call_id": "call_7", "content": "49"}


@pytest.mark.parametrize("api", ["chat", "completions", "responses", "anthropic"])
async def test_each_client_api_runs_an_environment_end_to_end(api, server):
    config = vf.ClientConfig(
        client_type={
            "chat": "openai_chat_completions",
            "completions": "openai_completions",
            "responses": "openai_responses",
            "anthropic": "anthropic_messages",
        }[api],
        api_base_url=server.base_url,
        api_key_var="VF_TEST_UNSET_KEY",
        max_retries=0,
    )
    env = vf.SingleTurnEnv(dataset=rows(2), rubric=vf.Rubric(funcs=[by_attribute]))
    out = await env.evaluate(config, "m", sampling_args={"max_tokens": 16})
    assert out.reward == [1.0, 1.0]
    paths = {
        "chat": "messages",
        "completions": "prompt",
        "responses": "input",
        "anthropic": "messages",
    }
    assert all(paths[api] in request for request in server.requests)
    if api == "anthropic":
        assert server.requests[0]["max_tokens"] == 16
    if api == "responses":
        assert server.requests[0]["max_output_tokens"] == 16


@pytest.mark.parametrize("api", ["responses", "anthropic"])
async def test_tool_calls_round_trip_through_the_responses_and_anthropic_apis(api, server):
    config = vf.ClientConfig(
        client_type="openai_responses" if api == "responses" else "anthropic_messages",
        api_base_url=server.base_url,
        max_retries=0,
    )
    server.set_handler(tool_then_answer)
    env = vf.ToolEnv(tools=[square], dataset=rows(1), max_turns=3)
    out = await env.evaluate(config, "m")
    completion = out.state[0]["completion"]
    assert completion[-1].content == "The answer is 49."
    second = server.requests[1]
    if api == "responses":
        kinds = [item.get("type") for item in second["input"]]
        assert kinds == ["message", "function_call", "function_call_output"]
        assert second["tools"][0]["name"] == "square"
    else:
        assert second["messages"][1]["content"][-1]["type"] == "tool_use"
        assert second["messages"][2]["content"][0]["type"] == "tool_result"
        assert second["tools"][0]["input_schema"]["properties"]["x"]["type"] == "integer"


async def test_a_context_length_error_ends_the_rollout_as_overlong_on_each_api(server):
    server.enqueue(Reply(status=400, error="This model's maximum context length is 8 tokens"))
    config = vf.ClientConfig(
        api_base_url=server.base_url, max_retries=0, client_type="anthropic_messages"
    )
    env = vf.SingleTurnEnv(dataset=rows(1))
    out = await env.evaluate(config, "m")
    state = out.state[0]
    # on the first turn nothing was generated: the rollout failed, and says why
    assert state["prompt_too_long"] is True and state["stop_condition"] == "has_error"
    assert isinstance(state["error"], vf.OverlongPromptError)

    # later, the context filling up ends the rollout as the classic SDK ends it: a stop
    class TwoTurns(vf.MultiTurnEnv):
        async def env_response(self, messages, state, **kwargs):
            return [vf.UserMessage(content="more")]

    server.enqueue("first reply")
    server.enqueue(Reply(status=400, error="This model's maximum context length is 8 tokens"))
    config = vf.ClientConfig(api_base_url=server.base_url, max_retries=0)
    out = await TwoTurns(dataset=rows(1), max_turns=3).evaluate(config, "m")
    state = out.state[0]
    assert state["stop_condition"] == "prompt_too_long" and state["error"] is None
    assert len(state["trajectory"]) == 1


def test_release_comes_from_the_requirement_lower_bound():
    assert lower_bound(">=0.1.9,<0.4") == vf.classic.releases.parse_version("0.1.9")
    assert str(from_requirements(["datasets", "verifiers>=0.1.11.dev0"])) == "0.1.11"
    assert str(from_requirements(["verifiers==0.2.0"])) == "0.2.0"
    assert from_requirements(["verifiers"]) is None
    assert str(from_requirements(["verifiers>=9"])) == "0.3.1"  # clamped to the last classic one


async def test_release_decides_messages_metrics_and_metric_names(server, client, monkeypatch):
    monkeypatch.setenv("VF_API_VERSION", "0.1.8")
    old = vf.SingleTurnEnv(dataset=rows(1), rubric=vf.MathRubric())
    assert old.release.version.base_version == "0.1.8"
    out = await old.evaluate(client, "m")
    assert set(out.metrics) == {"correct_answer_reward_func"}  # 0.1.8: no monitor metrics
    assert isinstance(out.state[0]["completion"][0], dict)
    with vf.written_for("0.1.9"):  # the scope beats the environment variable
        mid = vf.SingleTurnEnv(dataset=rows(1), rubric=vf.MathRubric())
    out = await mid.evaluate(client, "m")
    assert set(out.metrics) == {"correct_answer", "num_turns"}
    assert isinstance(out.state[0]["completion"][0], dict)  # typed messages arrived in 0.1.11
    monkeypatch.delenv("VF_API_VERSION")
    new = vf.SingleTurnEnv(dataset=rows(1))
    assert new.release.typed_messages and new.release.version == vf.classic.LATEST


async def test_results_come_as_columns_and_as_outputs_rows(server, client):
    env = vf.SingleTurnEnv(dataset=rows(2), rubric=vf.Rubric(funcs=[by_key]))
    out = await env.evaluate(client, "m", rollouts_per_example=2)
    assert out.reward == [1.0] * 4 and out["metadata"]["avg_reward"] == 1.0
    rows_ = out["outputs"]
    assert [r["example_id"] for r in rows_] == [0, 0, 1, 1]
    first = rows_[0]
    assert first["completion"] == [{"role": "assistant", "content": "q0"}]
    assert first["by_key"] == 1.0 and first["metrics"]["by_key"] == 1.0  # flattened, as 0.1.11+
    assert json.dumps(first)  # JSON-ready
    meta = out["metadata"]
    assert meta["pass_at_k"] == {"1": 1.0, "2": 1.0} and meta["pass_all_k"] == {"1": 1.0, "2": 1.0}
    assert meta["time"] > 0 and meta["version_info"]["vf_version"]


async def test_a_dataset_builder_is_called_once_on_first_use(server, client):
    calls = []

    def build():
        calls.append(1)
        return rows(3)

    env = vf.SingleTurnEnv(dataset=build)
    assert calls == []
    out = await env.evaluate(client, "m")
    assert len(out.reward) == 3 and calls == [1]
    assert len(env.get_dataset()) == 3 and calls == [1]


async def test_completion_environments_exchange_text_messages(server, client):
    env = vf.SingleTurnEnv(
        dataset=[{"prompt": "hello", "answer": "hello"}], message_type="completion"
    )
    out = await env.evaluate(client, "m")
    state = out.state[0]
    assert (
        isinstance(state["prompt"][0], vf.TextMessage) and state["completion"][0].content == "hello"
    )
    assert server.requests[0]["prompt"] == "hello"


async def test_env_group_routes_by_info_env_id(server, client):
    server.set_handler(lambda req: "A" if "alpha" in req["messages"][-1]["content"] else "B")
    a = vf.SingleTurnEnv(
        dataset=[{"question": "alpha", "answer": "A"}], rubric=vf.Rubric(funcs=[by_key])
    )
    b = vf.SingleTurnEnv(
        dataset=[{"question": "beta", "answer": "A"}], rubric=vf.Rubric(funcs=[by_key])
    )
    group = vf.EnvGroup([a, b], env_names=["a", "b"])
    assert [r["info"]["env_id"] for r in group.get_dataset()] == ["a", "b"]
    out = await group.evaluate(client, "m")
    assert {s["info"]["env_id"]: s["reward"] for s in out.state} == {"a": 1.0, "b": 0.0}


async def test_decorated_methods_join_the_engine(server, client):
    class Decorated(vf.SingleTurnEnv):
        @vf.setup
        async def mark(self, state):
            state["prepared"] = True

        @vf.reward(weight=2.0)
        async def said_it(self, completion, answer):
            return float(completion[-1].content == answer)

        @vf.metric
        async def length(self, completion):
            return float(len(completion[-1].content))

        @vf.update
        async def after(self, state):
            state["updated"] = state["prepared"]

        @vf.update(stage="group")
        async def after_group(self, states):
            for state in states:
                state["group_size"] = len(states)

        @vf.advantage
        async def rank(self, states):
            return [float(i) for i, _ in enumerate(states)]

    env = Decorated(dataset=rows(1))
    out = await env.evaluate(client, "m", rollouts_per_example=3)
    assert out.reward == [2.0, 2.0, 2.0] and out.metrics["length"] == [2.0] * 3
    assert [s["advantage"] for s in out.state] == [0.0, 1.0, 2.0]
    assert all(s["updated"] and s["group_size"] == 3 for s in out.state)


async def test_retries_rerun_a_rollout_whose_infrastructure_failed(server, client):
    attempts = []

    class Flaky(vf.SingleTurnEnv):
        async def setup_state(self, state, **kwargs):
            attempts.append(1)
            if len(attempts) < 3:
                raise vf.SandboxError("sandbox did not start")
            return state

    out = await Flaky(dataset=rows(1)).evaluate(client, "m", max_retries=2)
    assert len(attempts) == 3 and out.state[0]["error"] is None


async def test_a_vf_client_works_for_a_dict_era_environment(server, dict_era):
    env = vf.SingleTurnEnv(dataset=rows(1), rubric=vf.Rubric(funcs=[by_key]))
    config = vf.ClientConfig(
        client_type="openai_responses", api_base_url=server.base_url, max_retries=0
    )
    out = await env.evaluate(config, "m")
    assert out.reward == [1.0]
    assert out.state[0]["responses"][0].choices[0].message.content == "q0"


def test_upstream_module_paths_exist():
    import verifiers.envs.experimental.gym_env as gym
    import verifiers.envs.experimental.mcp_env as mcp_env
    from verifiers.clients.client import Client
    from verifiers.envs.sandbox_env import SandboxState
    from verifiers.utils.save_utils import state_to_output
    from verifiers.utils.tool_utils import convert_func_to_tool_def

    assert gym.GymEnv and mcp_env.MCPEnv and Client and SandboxState and state_to_output
    assert convert_func_to_tool_def(square).parameters["properties"]["x"]["type"] == "integer"
    missing = [
        n for n in ("Client", "UserMessage", "Tool", "reward", "ClientConfig") if not hasattr(vf, n)
    ]
    assert missing == []


def test_scripted_server_speaks_each_api():
    with ModelServer(handler=lambda req: "pong") as server:
        import httpx

        base = server.base_url
        chat = httpx.post(
            f"{base}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
        ).json()
        resp = httpx.post(f"{base}/responses", json={"model": "m", "input": "x"}).json()
        msg = httpx.post(
            f"{base}/messages",
            json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]},
            headers={"anthropic-version": "2023-06-01"},
        ).json()
    assert chat["choices"][0]["message"]["content"] == "pong"
    assert resp["output"][0]["content"][0]["text"] == "pong" and resp["status"] == "completed"
    assert (
        msg["content"][0] == {"type": "text", "text": "pong"} and msg["stop_reason"] == "end_turn"
    )
