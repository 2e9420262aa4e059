"""A rollout's state holds its own copy of the dataset row (``rollout_state._copy``, the short
cut for JSON-shaped rows): the same value ``copy.deepcopy`` gave, never shared with the row."""

from __future__ import annotations

import copy
from datetime import date

import verifiers as vf
from verifiers.envs.rollout_state import _copy, new_state


class Opaque:
    def __init__(self, items: list[int]) -> None:
        self.items = items

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and other.items == self.items


def test_a_row_copy_equals_deepcopy_and_shares_nothing():
    shared = [1, 2]
    row = {
        "prompt": [{"role": "user", "content": "q"}],
        "info": {"a": [1, {"b": (2, 3)}], "when": date(2026, 12, 7), "obj": Opaque(shared)},
        "answer": "x",
        "n": 1.5,
        "flag": None,
    }
    copied = _copy(row)
    assert copied == copy.deepcopy(row)
    assert copied["info"]["a"][1]["b"] == (2, 3)
    copied["prompt"][0]["content"] = "changed"
    copied["info"]["a"].append(9)
    copied["info"]["obj"].items.append(3)
    assert row["prompt"][0]["content"] == "q" and row["info"]["a"] == [1, {"b": (2, 3)}]
    assert shared == [1, 2]  # an object no short cut knows is deep-copied as before


def test_a_state_does_not_write_through_to_its_dataset_row():
    env = vf.SingleTurnEnv(dataset=[{"question": "q", "answer": "a"}], rubric=vf.Rubric())
    row = {"prompt": [{"role": "user", "content": "q"}], "answer": "a", "info": {"k": [1]}}
    state = new_state(env, row, None, "m", {})
    state["info"]["k"].append(2)
    state["input"]["prompt"].append({"role": "user", "content": "more"})
    assert row == {"prompt": [{"role": "user", "content": "q"}], "answer": "a", "info": {"k": [1]}}
