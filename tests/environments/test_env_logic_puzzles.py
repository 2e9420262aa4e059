"""logic-puzzles: reasoning-gym's tasks chosen by env args, graded by their own scorers over HTTP."""

import pytest

from verifiers.testing import Reply, last_user_text

pytest.importorskip("reasoning_gym")


def test_tasks_difficulty_and_seed_choose_the_rows():
    from logic_puzzles import load_environment, task_config

    env = load_environment(
        tasks=["gcd", "leg_counting"], num_train_examples=20, num_eval_examples=8
    )
    again = load_environment(
        tasks=["gcd", "leg_counting"], num_train_examples=20, num_eval_examples=8
    )
    other = load_environment(
        tasks=["gcd", "leg_counting"], num_train_examples=20, num_eval_examples=8, seed=1
    )
    questions = [r["question"] for r in env.eval_dataset]
    assert len(questions) == 8 and questions == [r["question"] for r in again.eval_dataset]
    assert questions != [r["question"] for r in other.eval_dataset]
    assert {r["info"]["source_dataset"] for r in env.eval_dataset} <= {"gcd", "leg_counting"}
    # the answer key stays in this process: a row's answer is an index into the generated set
    assert all(r["answer"].isdigit() for r in env.eval_dataset)
    assert task_config("gcd", 3, None) != task_config("gcd", 0, None)  # the curriculum's levels
    with pytest.raises(ValueError, match="did you mean"):
        load_environment(tasks=["gcdd"])
    with pytest.raises(ValueError, match="not in tasks"):
        load_environment(tasks=["gcd"], configs={"chain_sum": {}})


async def test_scorers_grade_a_scripted_rollout_and_edge_cases(server, client):
    from logic_puzzles import load_environment

    env = load_environment(tasks=["leg_counting"], num_train_examples=2, num_eval_examples=6)
    key = {r["question"]: env.rg_dataset[int(r["answer"])]["answer"] for r in env.eval_dataset}
    questions = list(key)

    def model(request):
        question = last_user_text(request)
        i = questions.index(question)
        if i == 0:
            return f"<answer>{key[question]}</answer>"  # right
        if i == 1:
            return "<answer>-1</answer>"  # wrong
        if i == 2:
            return ""  # empty reply
        if i == 3:  # claims, outside the answer tag, to be right: the scorer reads the tag only
            return f"The correct answer is {key[question]}. <answer>-7</answer> (graded: correct)"
        if i == 4:
            return Reply(tool_calls=[{"name": "no_such_tool", "arguments": "{not json"}])
        return f"<answer>{key[question]}</answer>"

    server.set_handler(model)
    out = await env.evaluate(client, "m")
    by_question = {s["prompt"][-1]["content"]: s for s in out.state}
    rewards = [by_question[q]["reward"] for q in questions]
    assert rewards[0] == 1.0 and rewards[5] == 1.0
    assert rewards[1] == 0.0 and rewards[2] == 0.0 and rewards[3] == 0.0 and rewards[4] == 0.0
