"""Rollouts through the real HTTP path: single-turn, multi-turn, stop conditions, lifecycle hooks."""

import json

import pytest
from openai import AsyncOpenAI

import verifiers as vf
from verifiers.testing import Reply, last_user_text


def exact(completion, answer):
    return (
        float(completion[-1]["content"] == answer)
        if isinstance(completion, list)
        else float(completion == answer)
    )


def qa_rows(n=4):
    return [{"question": f"q{i}", "answer": f"q{i}"} for i in range(n)]


async def test_single_turn_evaluate_scores_real_replies(server, client):
    env = vf.SingleTurnEnv(dataset=qa_rows(), rubric=vf.Rubric(funcs=[exact]))
    out = await env.evaluate(client, "test-model", rollouts_per_example=3)
    assert len(out) == 12 and out.reward == [1.0] * 12
    assert out.example_id == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert [s["rollout_index"] for s in out.state[:3]] == [0, 1, 2]
    assert all(s["advantage"] == 0.0 for s in out.state)
    assert len(server.requests) == 12


async def test_sampling_args_reach_the_server(server, client):
    env = vf.SingleTurnEnv(dataset=qa_rows(1), sampling_args={"temperature": 0.3})
    await env.evaluate(client, "m", sampling_args={"max_tokens": 7, "extra_body": {"top_k": 5}})
    request = server.requests[0]
    # as the classic SDK sends them: max_tokens renamed for chat, n=1, extra_body merged
    assert request["temperature"] == 0.3 and request["max_completion_tokens"] == 7
    assert request["top_k"] == 5 and request["n"] == 1 and "extra_body" not in request


async def test_openai_sdk_client_is_accepted(server):
    env = vf.SingleTurnEnv(dataset=qa_rows(2), rubric=vf.Rubric(funcs=[exact]))
    out = await env.evaluate(AsyncOpenAI(base_url=server.base_url, api_key="k"), "m")
    assert out.reward == [1.0, 1.0]


class Countdown(vf.MultiTurnEnv):
    """The environment answers each reply with the next number; the model echoes it back."""

    async def setup_state(self, state, **kwargs):
        state["counter"] = 0
        state["cleaned"] = False
        return state

    async def env_response(self, messages, state, **kwargs):
        state["counter"] += 1
        return [{"role": "user", "content": f"n{state['counter']}"}]

    @vf.stop
    async def reached_three(self, state) -> bool:
        return state["counter"] >= 3

    @vf.cleanup
    async def mark_cleaned(self, state):
        state["cleaned"] = True


async def test_multi_turn_rollout_runs_until_stop_condition(server, client):
    env = Countdown(dataset=[{"question": "n0"}], max_turns=10)
    out = await env.evaluate(client, "m")
    state = out.state[0]
    # classic order: stop conditions are checked before each turn's env_response, so the
    # fourth reply (to counter 3) is the last one
    assert state["stop_condition"] == "reached_three"
    assert len(state["trajectory"]) == 4
    assert [m["content"] for m in state["completion"]] == ["n0", "n1", "n1", "n2", "n2", "n3", "n3"]
    assert state["cleaned"] is True and state["metrics"]["num_turns"] == 4
    # each trajectory step saw exactly the conversation so far
    assert [len(step["prompt"]) for step in state["trajectory"]] == [1, 3, 5, 7]


async def test_max_turns_stops_and_is_recorded(server, client):
    env = Countdown(dataset=[{"question": "n0"}], max_turns=2)
    out = await env.evaluate(client, "m")
    assert out.state[0]["stop_condition"] == "max_turns_reached" and len(out.state[0]["trajectory"]) == 2


class ClassicGuess(vf.MultiTurnEnv):
    """Classic v0.1.x style: is_completed override and (messages, state) tuples."""

    def is_completed(self, messages, state, **kwargs):
        return "win" in messages[-1]["content"]

    def env_response(self, messages, state, **kwargs):
        state["guesses"] = state.get("guesses", 0) + 1
        return [{"role": "user", "content": "win" if state["guesses"] >= 2 else "again"}], state


async def test_classic_is_completed_and_tuple_env_response(server, client):
    server.set_handler(last_user_text)
    env = ClassicGuess(dataset=[{"question": "go"}])
    out = await env.evaluate(client, "m")
    state = out.state[0]
    assert state["stop_condition"] == "is_completed" and state["guesses"] == 2
    assert state["completion"][-1]["content"] == "win"


class NoStop(vf.MultiTurnEnv):
    def is_completed(self, messages, state, **kwargs):
        return False  # forgets the turn limit: the engine still enforces it

    def env_response(self, messages, state, **kwargs):
        return [{"role": "user", "content": "more"}]


async def test_forgotten_turn_limit_in_override_is_still_enforced(server, client):
    out = await NoStop(dataset=[{"question": "go"}], max_turns=3).evaluate(client, "m")
    assert len(out.state[0]["trajectory"]) == 3
    assert out.state[0]["stop_condition"] == "max_turns_reached"


class Priorities(vf.MultiTurnEnv):
    async def env_response(self, messages, state, **kwargs):
        return []

    @vf.stop(priority=1)
    async def low(self, state):
        return True

    @vf.stop(priority=5)
    async def high(self, state):
        return True


async def test_stop_conditions_checked_by_priority(server, client):
    out = await Priorities(dataset=[{"question": "go"}]).evaluate(client, "m")
    assert out.state[0]["stop_condition"] == "high" and out.state[0]["trajectory"] == []


class Exploding(vf.MultiTurnEnv):
    async def env_response(self, messages, state, **kwargs):
        raise KeyError("board")


async def test_env_response_error_is_recorded_and_keeps_partial_completion(server, client):
    env = Exploding(dataset=qa_rows(2), rubric=vf.Rubric(funcs=[exact]), max_turns=5)
    out = await env.evaluate(client, "m")
    for state in out.state:
        assert state["error"]["type"] == "EnvironmentResponseError"
        assert state["error"]["phase"] == "env_response" and "KeyError" in state["error"]["message"]
        assert state["completion"][0]["role"] == "assistant"
        assert state["reward"] == 0.0


class BadSetup(vf.SingleTurnEnv):
    async def setup_state(self, state, **kwargs):
        raise RuntimeError("no sandbox")


async def test_setup_state_error_is_recorded(server, client):
    out = await BadSetup(dataset=qa_rows(1)).evaluate(client, "m")
    assert (
        out.state[0]["error"]["phase"] == "setup"
        and "no sandbox" in out.state[0]["error"]["message"]
    )
    assert server.requests == []


class Teardown(vf.SingleTurnEnv):
    torn = 0

    @vf.teardown
    async def close(self):
        Teardown.torn += 1


async def test_teardown_runs_once():
    env = Teardown(dataset=qa_rows(1))
    async with env:
        pass
    await env.teardown()
    assert Teardown.torn == 1


@pytest.mark.usefixtures("dict_era")
async def test_completion_mode_uses_completions_endpoint(server, client):
    server.set_handler(lambda req: " world")
    env = vf.SingleTurnEnv(
        dataset=[{"prompt": "hello", "answer": " world"}],
        message_type="completion",
        rubric=vf.Rubric(funcs=[exact]),
    )
    out = await env.evaluate(client, "m")
    assert out.completion == [" world"] and out.reward == [1.0]
    assert server.requests[0]["prompt"] == "hello"


@pytest.mark.usefixtures("dict_era")
async def test_tool_calls_and_tool_call_ids_survive_lossless(server, client, tmp_path):
    call = Reply.tool_call("lookup", {"city": "Paris"}, call_id="call_42")

    class ToolEcho(vf.MultiTurnEnv):
        async def env_response(self, messages, state, **kwargs):
            tool_call = messages[-1]["tool_calls"][0]
            return [{"role": "tool", "tool_call_id": tool_call["id"], "content": "sunny"}]

    server.enqueue(Reply(content=None, tool_calls=[call]), Reply(content="It is sunny."))
    env = ToolEcho(dataset=[{"question": "weather?"}], max_turns=2)
    out = await env.evaluate(client, "m", results_path=str(tmp_path / "run"))
    completion = out.state[0]["completion"]
    assert completion[0] == {"role": "assistant", "content": "", "tool_calls": [call]}
    assert completion[1] == {"role": "tool", "tool_call_id": "call_42", "content": "sunny"}
    # the second request carried the tool call and its result back to the server unchanged
    assert server.requests[1]["messages"][1:] == completion[:2]
    saved = json.loads((tmp_path / "run" / "results.jsonl").read_text().splitlines()[0])
    assert saved["completion"] == completion


async def test_token_ids_and_logprobs_are_recorded_in_the_trajectory(server, client):
    env = vf.SingleTurnEnv(dataset=[{"question": "abc"}])
    out = await env.evaluate(
        client, "m", sampling_args={"logprobs": True, "extra_body": {"return_token_ids": True}}
    )
    tokens = out.state[0]["trajectory"][0]["tokens"]
    assert tokens["completion_ids"] == list(b"abc")
    assert tokens["completion_logprobs"] == [-0.5] * 3
    assert (
        tokens["completion_mask"] == [1, 1, 1]
        and len(tokens["prompt_ids"]) == len(tokens["prompt_mask"]) > 0
    )


async def test_trajectory_steps_carry_final_reward_and_advantage(server, client):
    server.set_handler(lambda req: "right" if req["messages"][-1]["content"] == "q0" else "wrong")
    env = vf.SingleTurnEnv(
        dataset=[{"question": "q0", "answer": "right"}], rubric=vf.Rubric(funcs=[exact])
    )
    server.enqueue("wrong")
    out = await env.evaluate(client, "m", rollouts_per_example=2)
    rewards = sorted(out.reward)
    assert rewards == [0.0, 1.0]
    advantages = sorted(s["advantage"] for s in out.state)
    assert advantages == [-0.5, 0.5] and sum(advantages) == 0.0
    for state in out.state:
        assert state["trajectory"][-1]["reward"] == state["reward"]
        assert state["trajectory"][-1]["advantage"] == state["advantage"]


async def test_generate_accepts_classic_column_dict(server, client):
    env = vf.SingleTurnEnv(dataset=qa_rows(1), rubric=vf.Rubric(funcs=[exact]))
    inputs = {"prompt": [[{"role": "user", "content": "x"}]], "answer": ["x"]}
    out = await env.generate(inputs, client, "m")
    assert out.reward == [1.0]


async def test_make_dataset_from_results(server, client):
    env = vf.SingleTurnEnv(dataset=qa_rows(2), rubric=vf.Rubric(funcs=[exact]))
    out = await env.evaluate(client, "m")
    ds = env.make_dataset(out, state_columns=["turn"])
    assert len(ds) == 2 and set(ds.column_names) >= {"prompt", "completion", "reward", "turn"}


def test_evaluate_sync(server):
    env = vf.SingleTurnEnv(dataset=qa_rows(2), rubric=vf.Rubric(funcs=[exact]))
    out = env.evaluate_sync(server.base_url, "m")
    assert out.reward == [1.0, 1.0]
    out = env.evaluate_sync(server.base_url, "m")  # a second event loop reuses nothing stale
    assert out.reward == [1.0, 1.0]


def test_a_sync_run_never_formats_its_result_on_the_way_out():
    """``asyncio.run`` puts its SIGINT handler back through ``signal.getsignal``, which formats
    the handler, a ``partial`` holding the main task, with ``repr``: task result included, every
    rollout state of a run (0.5 s of CPU at 600 rollouts, twice). The result never sits there."""
    from verifiers.envs.environment import run_sync

    formatted = []

    class Result:
        def __repr__(self) -> str:
            formatted.append(1)
            return "Result()"

    async def run() -> Result:
        return Result()

    assert isinstance(run_sync(run()), Result) and formatted == []


@pytest.mark.usefixtures("dict_era")
@pytest.mark.parametrize("n", [1, 3])
async def test_env_group_routes_by_task_with_unique_ids(server, client, n):
    server.set_handler(lambda req: "A" if "alpha" in req["messages"][-1]["content"] else "B")
    a = vf.SingleTurnEnv(
        dataset=[{"question": "alpha", "answer": "A"}] * n, rubric=vf.Rubric(funcs=[exact])
    )
    b = Countdown(
        dataset=[{"question": "beta", "answer": "B"}] * n,
        max_turns=1,
        rubric=vf.Rubric(funcs=[lambda completion: 0.5]),
    )
    group = vf.EnvGroup([a, b], env_names=["a", "b"])
    assert group.dataset["example_id"] == list(range(2 * n))
    out = await group.evaluate(client, "m")
    by_task = {
        t: [r for r, tt in zip(out.reward, out.task, strict=True) if tt == t] for t in ("a", "b")
    }
    assert by_task == {"a": [1.0] * n, "b": [0.5] * n}
    assert set(out.metrics) == {"exact", "<lambda>"}  # 0.1.8 adds no monitor metrics
    assert all("counter" in s for s in out.state if s["task"] == "b")
