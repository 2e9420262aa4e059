import asyncio

import pytest

import verifiers as vf
from verifiers.types import State


def make_state(completion_text: str, answer: str = "4", example_id: int = 0) -> State:
    return State(
        input={
            "prompt": [{"role": "user", "content": "2+2?"}],
            "answer": answer,
            "info": {"k": 1},
            "task": "math",
            "example_id": example_id,
        },
        completion=[{"role": "assistant", "content": completion_text}],
        timing={"generation_ms": 1.0},
    )


async def test_reward_functions_receive_the_arguments_they_name():
    seen = {}

    def wants_some(completion, answer):
        seen["some"] = (completion[-1]["content"], answer)
        return 1.0

    def wants_all(prompt, completion, answer, state, task, info, parser, example_id, **kwargs):
        seen["all"] = (
            prompt[0]["content"],
            task,
            info,
            type(parser).__name__,
            example_id,
            "extra" in kwargs,
        )
        return 0.5

    rubric = vf.Rubric(funcs=[wants_some, wants_all], weights=[1.0, 2.0])
    rubric.add_class_object("extra", object())
    state = make_state("4")
    await rubric.score_group([state])
    assert seen["some"] == ("4", "4")
    assert seen["all"] == ("2+2?", "math", {"k": 1}, "Parser", 0, True)
    assert state["reward"] == 2.0
    assert state["metrics"] == {"wants_some": 1.0, "wants_all": 0.5}


async def test_async_functions_weights_and_zero_weight_metrics():
    async def correct(completion, answer):
        await asyncio.sleep(0)
        return completion[-1]["content"] == answer

    def length(completion):
        return len(completion[-1]["content"])

    rubric = vf.Rubric(funcs=[correct], weights=[0.5])
    rubric.add_metric(length)
    states = [make_state("4"), make_state("five")]
    await rubric.score_group(states)
    assert [s["reward"] for s in states] == [0.5, 0.0]
    assert [s["metrics"]["length"] for s in states] == [1.0, 4.0]
    assert rubric.get_reward_weights() == [0.5, 0.0]
    assert rubric.get_reward_func_names() == ["correct", "length"]


async def test_group_reward_function_sees_the_whole_group():
    def rank(completions, answers):
        lengths = [len(c[-1]["content"]) for c in completions]
        return [1.0 if n == min(lengths) else 0.0 for n in lengths]

    rubric = vf.Rubric(funcs=[rank])
    states = [make_state("long answer"), make_state("4"), make_state("mid")]
    await rubric.score_group(states)
    assert [s["reward"] for s in states] == [0.0, 1.0, 0.0]


async def test_crashing_reward_function_scores_zero_and_is_recorded():
    def broken(completion):
        raise ZeroDivisionError("boom")

    def fine(completion):
        return 1.0

    def returns_none(completion):
        return None

    rubric = vf.Rubric(funcs=[broken, fine, returns_none])
    state = make_state("4")
    await rubric.score_group([state])
    assert state["reward"] == 1.0
    errors = state["reward_errors"]
    assert [e["function"] for e in errors] == ["broken", "returns_none"]
    assert errors[0]["type"] == "ZeroDivisionError" and "boom" in errors[0]["message"]
    assert "returned None" in errors[1]["message"]


async def test_group_function_returning_wrong_length_is_recorded():
    def bad_group(completions):
        return [1.0]

    rubric = vf.Rubric(funcs=[bad_group])
    states = [make_state("a"), make_state("b")]
    await rubric.score_group(states)
    assert all(s["reward"] == 0.0 for s in states)
    assert "returned 1 values for 2 rollouts" in states[0]["reward_errors"][0]["message"]


async def test_errored_rollouts_score_zero_without_calling_functions():
    calls = []

    def f(completion):
        calls.append(1)
        return 1.0

    ok, failed = make_state("4"), make_state("")
    failed["error"] = {"type": "ServerError", "message": "x", "phase": "model"}
    await vf.Rubric(funcs=[f]).score_group([ok, failed])
    assert len(calls) == 1 and ok["reward"] == 1.0 and failed["reward"] == 0.0


def test_weights_must_match_functions():
    with pytest.raises(
        ValueError, match=r"Number of weights \(1\) must match number of functions \(2\)"
    ):
        vf.Rubric(funcs=[lambda: 1, lambda: 2], weights=[1.0])


async def test_rubric_group_sums_rewards_and_merges_metrics():
    a = vf.Rubric(funcs=[lambda completion: 1.0], weights=[1.0])
    b = vf.Rubric(funcs=[lambda completion: 0.25], weights=[2.0])
    group = vf.RubricGroup([a, b])
    state = make_state("4")
    await group.score_group([state])
    assert state["reward"] == 1.5
    assert state["metrics"] == {"<lambda>": 1.25}  # same name: values add up
    assert len(group.get_reward_funcs()) == 2


async def test_classic_score_rollout_entry_point():
    rubric = vf.Rubric(
        funcs=[lambda completion, answer: float(completion[-1]["content"] == answer)]
    )
    score = await rubric.score_rollout(
        prompt=[{"role": "user", "content": "q"}],
        completion=[{"role": "assistant", "content": "a"}],
        answer="a",
        state={},
    )
    assert score.reward == 1.0


async def test_math_rubric_checks_equivalence():
    rubric = vf.MathRubric()
    states = [
        make_state(r"The answer is \boxed{\frac{1}{2}}", answer="0.5"),
        make_state(r"\boxed{3}", answer="0.5"),
        make_state("no box", answer="0.5"),
    ]
    await rubric.score_group(states)
    assert [s["reward"] for s in states] == [1.0, 0.0, 0.0]


async def test_judge_rubric_asks_the_judge_through_http(server):
    server.set_handler(
        lambda req: (
            "yes" if "Ground truth answer:\n```\n4\n```" in req["messages"][0]["content"] else "no"
        )
    )
    rubric = vf.JudgeRubric(judge_client=server.base_url, judge_model="judge")

    async def judged(judge, prompt, completion, answer, state):
        return 1.0 if "yes" in (await judge(prompt, completion, answer, state)).lower() else 0.0

    rubric.add_reward_func(judged)
    states = [make_state("4", answer="4"), make_state("5", answer="6")]
    await rubric.score_group(states)
    assert [s["reward"] for s in states] == [1.0, 0.0]
    assert server.requests[0]["model"] == "judge"
    assert len(states[0]["judge_response"]) == 1
