"""A state's snapshot (what a worker sends back) takes the plain types' short cut in
``snapshot._plain`` and reads as it did before it: JSON-ready, keys as strings, tuples as lists,
models dumped, errors as records, and nothing shared with the live state."""

from __future__ import annotations

import msgpack

import verifiers as vf
from verifiers.errors import to_record
from verifiers.types import State
from verifiers.workers.protocol import pack, unpack
from verifiers.workers.snapshot import restore, snapshot


class Counted(dict):
    """A dict subclass: not the exact type the short cut takes."""


def test_a_snapshot_of_mixed_values_is_json_ready_and_detached():
    info = {"tags": ["a", ("b", 2)], 3: {"nested": [1.5, None, True]}, "sub": Counted(x=1)}
    tool = vf.Tool(name="add", description="Add.", parameters={"type": "object"})
    error = ValueError("boom")
    state = State(input={"prompt": [{"role": "user", "content": "hi"}], "info": info})
    state.update(
        reward=1.0,
        metrics={"exact": 1.0},
        extra={"tool": tool, "error": error, "when": (1, 2)},
        completion=[{"role": "assistant", "content": "hello"}],
    )
    out = snapshot(state)
    assert out["input"]["info"] == {
        "tags": ["a", ["b", 2]],
        "3": {"nested": [1.5, None, True]},
        "sub": {"x": 1},
    }
    assert type(out["input"]["info"]["sub"]) is dict
    assert out["extra"]["tool"] == tool.model_dump(exclude_none=True)
    assert out["extra"]["error"] == to_record(error)
    assert out["extra"]["when"] == [1, 2]
    assert out["metrics"] == {"exact": 1.0} and out["reward"] == 1.0
    out["input"]["info"]["tags"].append("c")
    out["metrics"]["exact"] = 0.0
    assert info["tags"] == ["a", ("b", 2)] and state["metrics"] == {"exact": 1.0}
    # what crosses the wire decodes to the same, and reads back as the state
    assert unpack(pack(out)) == msgpack.unpackb(msgpack.packb(out), strict_map_key=False)
    back = restore(unpack(pack(out)))
    assert back["reward"] == 1.0
    assert back["info"]["3"] == {"nested": [1.5, None, True]}
