"""uppercase-v1, the v1 port of the CPU RL example's task: the classic task's tasks (train and
held-out splits) and its scores, through the real HTTP path by scripted replies."""

import re

import pytest

import verifiers as vf
from verifiers.testing import last_user_text


def words_of(request) -> str:
    return re.sub(r"^Rewrite in capital letters: ", "", last_user_text(request))


def test_the_v1_port_holds_the_classic_tasks_and_its_held_out_split():
    classic = vf.load_environment("uppercase", num_train_examples=30, num_eval_examples=7)
    ported = vf.load_environment(
        "uppercase-v1",
        env={"taskset": {"num_train_examples": 30, "num_eval_examples": 7}},
        eval_taskset={"split": "eval"},
    )
    for split in ("train", "eval"):
        want = classic.dataset_rows(split)
        got = ported.dataset_rows(split)
        assert [r["prompt"] for r in got] == [r["prompt"] for r in want]
        assert [r["answer"] for r in got] == [r["answer"] for r in want]
    assert len(ported.dataset_rows("train")) == 30 and len(ported.dataset_rows("eval")) == 7
    # without eval_taskset, the eval split is the train tasks (one taskset, as vf-eval runs it)
    plain = vf.load_environment("uppercase-v1", env={"taskset": {"num_train_examples": 5}})
    assert plain.dataset_rows("eval") == plain.dataset_rows("train")


@pytest.mark.parametrize(
    "reply",
    [
        lambda w: w.upper(),
        lambda w: w,
        lambda w: f"Sure! Here it is: {w.upper()}.",
    ],
    ids=["exact", "echo", "chatter"],
)
async def test_the_v1_port_scores_each_reply_as_the_classic_task(server, client, reply):
    server.set_handler(lambda request: reply(words_of(request)))
    scores = {}
    for env in (
        vf.load_environment("uppercase", num_eval_examples=6),
        vf.load_environment(
            "uppercase-v1",
            env={"taskset": {"num_eval_examples": 6}},
            eval_taskset={"split": "eval"},
        ),
    ):
        result = await env.evaluate(client, "m")
        scores[env.env_id] = (result.reward, result.metrics["exact"])
    assert scores["uppercase-v1"] == scores["uppercase"]
