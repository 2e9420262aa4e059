"""uppercase: the CPU RL example's task, scored through the real HTTP path by scripted replies."""

import re

import pytest

from verifiers.testing import last_user_text


def words_of(request) -> str:
    return re.sub(r"^Rewrite in capital letters: ", "", last_user_text(request))


def test_rows_are_reproducible_by_seed_and_hold_their_answer():
    from uppercase import WORDS, load_environment, make_rows

    rows = make_rows(200, 0)
    assert rows == make_rows(200, 0) and rows != make_rows(200, 1)
    for row in rows:
        text = row["info"]["text"]
        assert row["question"] == f"Rewrite in capital letters: {text}"
        assert row["answer"] == text.upper() and 2 <= len(text.split()) <= 4
        assert set(text.split()) <= set(WORDS) and len(set(text.split())) == len(text.split())
    env = load_environment(num_train_examples=30, num_eval_examples=7, seed=3)
    assert len(env.dataset_rows("train")) == 30 and len(env.dataset_rows("eval")) == 7
    assert [r["answer"] for r in env.dataset_rows("eval")] == [
        r["answer"]
        for r in make_rows(7, 4)  # the eval split is the next seed's rows
    ]


@pytest.mark.parametrize(
    ("reply", "similarity", "exact"),
    [
        (lambda w: w.upper(), 1.0, 1.0),
        (lambda w: f"  {w.upper()}\n", 1.0, 1.0),  # surrounding whitespace is not the answer
        (lambda w: w, None, 0.0),  # echoing the input: only the spaces match
        (lambda w: w.upper().split()[0], None, 0.0),  # a short reply loses what it leaves out
        (lambda w: f"Sure! Here it is: {w.upper()}. Anything else?", None, 0.0),  # chatter
        (lambda w: "", 0.0, 0.0),
    ],
    ids=["exact", "padded", "echo", "short", "chatter", "empty"],
)
async def test_only_the_whole_answer_scores_one(server, client, reply, similarity, exact):
    from uppercase import load_environment

    env = load_environment(num_eval_examples=12)
    server.set_handler(lambda request: reply(words_of(request)))
    result = await env.evaluate(client, "m")
    assert result.metrics["exact"] == [exact] * 12
    if similarity is not None:
        assert result.reward == [pytest.approx(similarity)] * 12
    else:
        assert all(0.0 < r < 0.85 for r in result.reward), result.reward
    assert result.reward == result.metrics["similarity"]  # exact is a metric of weight 0


def test_echo_scores_near_the_spaces_it_shares():
    """The docstring's claim: echoing the input scores about 0.1 on average."""
    from difflib import SequenceMatcher

    from uppercase import make_rows

    rows = make_rows(300, 0)
    echo = [
        SequenceMatcher(None, r["info"]["text"], r["answer"], autojunk=False).ratio() for r in rows
    ]
    assert 0.05 < sum(echo) / len(echo) < 0.2
