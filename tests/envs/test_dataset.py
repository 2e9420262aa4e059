import pytest
from datasets import Dataset

import verifiers as vf
from verifiers.errors import DatasetError


def env_for(rows, **kwargs):
    return vf.SingleTurnEnv(dataset=rows, **kwargs)


@pytest.mark.usefixtures("dict_era")
def test_question_becomes_prompt_with_system_prompt_and_few_shot():
    few_shot = [{"role": "user", "content": "1+1"}, {"role": "assistant", "content": "2"}]
    env = env_for(
        Dataset.from_list([{"question": "2+2", "answer": "4"}]),
        system_prompt="Be terse.",
        few_shot=few_shot,
    )
    row = env.dataset[0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user", "assistant", "user"]
    assert row["prompt"][-1]["content"] == "2+2"
    assert row["example_id"] == 0 and row["task"] == "default" and row["answer"] == "4"


def test_existing_prompt_and_ids_are_kept():
    rows = [
        {
            "prompt": [{"role": "user", "content": "hi"}],
            "answer": "x",
            "example_id": 7,
            "task": "greet",
            "info": {"a": 1},
        }
    ]
    env = env_for(rows)
    assert env.dataset[0]["example_id"] == 7 and env.dataset[0]["task"] == "greet"
    assert env.dataset[0]["info"] == {"a": 1}


def test_completion_mode_uses_the_question_as_the_prompt_and_refuses_a_system_prompt():
    env = vf.SingleTurnEnv(
        dataset=[{"question": "Say hi", "answer": "hi"}], message_type="completion"
    )
    assert env.dataset[0]["prompt"] == "Say hi"
    with pytest.raises(ValueError, match="not supported for completion tasks"):
        vf.SingleTurnEnv(
            dataset=[{"question": "q"}], message_type="completion", system_prompt="SYS"
        )


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"text": "no prompt"}], "need a 'prompt' or a 'question' column"),
        ([{"question": "ok"}, {"question": None}], "row 1 has neither"),
        ([{"question": 5}], "must be a string"),
        ([{"prompt": "a string"}], "is a string but this is a chat environment"),
        ([{"prompt": [{"content": "no role"}]}], "message 0: expected a dict with a 'role'"),
        ([{"prompt": [{"role": "wizard", "content": "x"}]}], "unknown role 'wizard'"),
        ([{"question": "a", "info": "{not json"}], "'info' is a string that is not JSON"),
        (
            [{"question": "a", "example_id": 1}, {"question": "b", "example_id": 1}],
            "example_id 1 appears more than once",
        ),
        ([], "the dataset is empty"),
        (["not a dict"], "row 0 is a str"),
    ],
)
def test_malformed_rows_fail_with_row_and_reason(rows, message):
    with pytest.raises(DatasetError, match=message):
        env_for(rows)


def test_environment_needs_some_dataset():
    with pytest.raises(ValueError, match="Either dataset or eval_dataset must be provided"):
        vf.SingleTurnEnv()


def test_non_integer_example_ids_are_kept_as_src_id():
    env = env_for([{"question": "a", "example_id": "x"}, {"question": "b", "example_id": "y"}])
    assert env.dataset["example_id"] == [0, 1] and env.dataset["src_id"] == ["x", "y"]


def test_get_dataset_never_shuffles_in_place():
    env = env_for([{"question": str(i), "answer": str(i)} for i in range(50)])
    before = env.dataset["example_id"]
    shuffled = env.get_dataset(seed=1)
    assert shuffled["example_id"] != before
    assert env.dataset["example_id"] == before
    assert len(env.get_dataset(n=5)) == 5


def test_eval_dataset_preferred_for_evaluation():
    env = vf.SingleTurnEnv(dataset=[{"question": "train"}], eval_dataset=[{"question": "eval"}])
    assert env.get_eval_dataset()[0]["prompt"][-1]["content"] == "eval"
    only_eval = vf.SingleTurnEnv(eval_dataset=[{"question": "e"}])
    with pytest.raises(ValueError, match="dataset is not set"):
        only_eval.get_dataset()
