"""A request validated in steps (``verifiers.workers.stepped_validation``) is the request
``model_validate`` makes, refused with the same reason at the same entry, while the event loop
turns between slices of its large containers (every ``TURN_S``, or ``TURN_STEPS`` slices, whichever
comes first); a field validated whole (``client_config``, which has validators) is refused past a
bound instead of holding the loop."""

from __future__ import annotations

import asyncio

import pytest

from verifiers.workers import stepped_validation
from verifiers.workers.protocol import RunGroupRequest, parse_request, parse_request_in_steps
from verifiers.workers.stepped_validation import STEP_ENTRIES, TURN_STEPS, WHOLE_ENTRIES

CONFIG = {"api_key_var": "OPENAI_API_KEY", "api_base_url": "http://127.0.0.1:1/v1"}


def request(**fields) -> dict:
    return {
        "request_type": "run_group",
        "group_inputs": [{"question": "q"}],
        "client_config": CONFIG,
        "model": "m",
        **fields,
    }


async def stepped_with_turns(data: dict) -> tuple[RunGroupRequest, int]:
    """The stepped validation's answer and how often another task ran meanwhile."""
    turns, done = 0, False

    async def other() -> None:
        nonlocal turns
        while not done:
            await asyncio.sleep(0)
            turns += 1

    ticker = asyncio.create_task(other())
    await asyncio.sleep(0)
    try:
        validated = await parse_request_in_steps(data)
    finally:
        done = True
        await ticker
    assert isinstance(validated, RunGroupRequest)
    return validated, turns


LARGE = {
    "many rows": request(group_inputs=[{f"k{j}": j for j in range(8)} for _ in range(30_000)]),
    "one row of many keys": request(group_inputs=[{f"k{j}": j for j in range(100_000)}]),
    "many empty rows": request(group_inputs=[{}] * 200_000),  # each counted as no entry
    # a large item behind small ones is stepped too (it was validated whole in their slice)
    "a row of many keys after a small one": request(
        group_inputs=[{"question": "q"}, {f"k{j}": j for j in range(100_000)}]
    ),
    "many sampling args": request(sampling_args={f"k{j}": j for j in range(100_000)}),
    "many members": request(members=[{"rollout_index": i} for i in range(40_000)]),
    "one member of many sampling args": request(
        members=[{"rollout_index": 0, "sampling_args": {f"k{j}": j for j in range(100_000)}}]
    ),
    "a member of many sampling args after a small one": request(
        members=[
            {"rollout_index": 0},
            {"rollout_index": 1, "sampling_args": {f"k{j}": j for j in range(100_000)}},
        ]
    ),
    "many state columns": request(state_columns=[f"c{j}" for j in range(100_000)]),
}


@pytest.mark.parametrize("shape", list(LARGE))
async def test_a_large_request_validates_in_steps_into_the_same_request(shape, monkeypatch):
    data = LARGE[shape]
    monkeypatch.setattr(stepped_validation, "TURN_S", 0.0)  # the loop runs after every slice
    validated, turns = await stepped_with_turns(data)
    whole = RunGroupRequest.model_validate(data)
    assert validated == whole and validated.model_dump() == whole.model_dump()
    assert validated.model_fields_set == whole.model_fields_set
    assert turns >= 8, f"the loop turned {turns} times while {shape} was validated"


@pytest.mark.parametrize("shape", ["many rows", "many members", "many state columns"])
async def test_however_quick_its_slices_the_loop_runs_every_few_of_them(shape, monkeypatch):
    """Turns are paced (``TURN_S``: one after every slice cost the server more than the
    validation, its other connections' traffic moving in as many small pieces), but never more
    than ``TURN_STEPS`` slices apart: with a pace no slice reaches, the loop still runs once
    every ``TURN_STEPS`` of them, into the same request."""
    data = LARGE[shape]
    monkeypatch.setattr(stepped_validation, "TURN_S", 0.0)
    _, every = await stepped_with_turns(data)
    monkeypatch.setattr(stepped_validation, "TURN_S", 3600.0)
    validated, paced = await stepped_with_turns(data)
    assert validated == RunGroupRequest.model_validate(data)
    assert every // TURN_STEPS - 1 <= paced <= every // TURN_STEPS + 1, (every, paced)


async def test_a_small_request_is_validated_at_once_and_a_wrong_one_refused_as_before():
    validated, _ = await stepped_with_turns(request(sampling_args={"temperature": 0.5}))
    assert validated == parse_request(request(sampling_args={"temperature": 0.5}))
    with pytest.raises(ValueError, match="timeout"):
        await parse_request_in_steps(request(timeout=-1))
    with pytest.raises(ValueError, match="unknown request_type 'nope'"):
        await parse_request_in_steps({"request_type": "nope"})


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("group_inputs", [{"q": 1}] * 20_000 + ["not a row"], "group_inputs.20000"),
        ("members", [{"rollout_index": i} for i in range(20_000)] + [{}], "members.20000"),
        ("sampling_args", {**{f"k{j}": j for j in range(20_000)}, 7: 1}, "sampling_args"),
    ],
    ids=["row", "member", "key"],
)
async def test_a_wrong_entry_past_the_first_slice_is_refused_naming_it(field, value, where):
    """The refusal names the entry where the whole request names it, not its place in a slice."""
    with pytest.raises(ValueError) as refused:
        await parse_request_in_steps(request(**{field: value}))
    assert str(refused.value).startswith(f"{where}"), refused.value
    with pytest.raises(ValueError):  # the whole validation refuses it too
        parse_request(request(**{field: value}))


ROW_SHAPES = {
    "alike": [{"question": "q", "answer": "a", "info": {}}] * 20_000,
    "varied": [{f"k{j}": j for j in range(i % 10)} for i in range(30_000)],
    "large behind small": [{"q": 1}] * 10
    + [{f"k{j}": j for j in range(20_000)}]
    + [{"q": 1}] * 9000,
    "large at a step's end": [{"a": 1, "b": 2, "c": 3}] * 4095
    + [{f"k{j}": j for j in range(5000)}],
    "some without a length": [{"q": 1}, 7, {"q": 1}] * 5000,
}


@pytest.mark.parametrize("shape", list(ROW_SHAPES))
def test_rows_are_sliced_a_step_at_a_time_and_a_large_row_alone(shape):
    """The slices rows are validated in cover them in order, each of at most a step of entries
    or up to the row that brings it past one; a row of more than a step is a slice alone (it is
    then validated stepped), whatever rows come before it."""
    from typing import Any

    rows = ROW_SHAPES[shape]
    slices = list(stepped_validation._slices(dict[str, Any], rows))
    sizes = [len(row) if isinstance(row, dict) else 1 for row in rows]
    assert [start for start, _, _ in slices] == [0] + [end for _, end, _ in slices[:-1]]
    assert slices[-1][1] == len(rows)
    for start, end, entries in slices:
        assert entries == sum(sizes[start:end])
        if end - start > 1:
            assert max(sizes[start:end]) <= STEP_ENTRIES, (start, end)
            assert entries - sizes[end - 1] < STEP_ENTRIES, (start, end, entries)
    large = [i for i, size in enumerate(sizes) if size > STEP_ENTRIES]
    assert all((i, i + 1) in {(start, end) for start, end, _ in slices} for i in large)


async def test_a_client_config_too_large_to_validate_whole_is_refused_and_a_real_one_passes():
    """``client_config`` has validators, so it is validated in one call; a million headers held
    the loop ~0.7 s. Past ``WHOLE_ENTRIES`` entries it is refused, saying so."""
    headers = {f"h{j}": "v" for j in range(WHOLE_ENTRIES + 1)}
    with pytest.raises(ValueError, match=f"client_config: more than {WHOLE_ENTRIES} entries"):
        await parse_request_in_steps(request(client_config={**CONFIG, "extra_headers": headers}))
    real = {**CONFIG, "extra_headers": {"X-Team": "a"}, "endpoint_configs": [CONFIG] * 4}
    validated = await parse_request_in_steps(request(client_config=real))
    assert validated == parse_request(request(client_config=real))
    assert STEP_ENTRIES < WHOLE_ENTRIES


def test_a_small_frame_is_read_without_hooks_as_the_bounded_decode_reads_it():
    """A frame of at most ``SMALL_FRAME`` bytes (most requests) is decoded without the charging
    hooks (they cost a small request's decode 2x): it gives the request the bounded decode
    gives, still refuses an extension type, and the costliest frame of that size (all empty
    maps) is one the bounded decode accepts too, so skipping the charge refuses nothing less."""
    from verifiers.workers.protocol import (
        SMALL_FRAME,
        DecodeCostError,
        pack,
        read_request,
        unpack_bounded,
        unpack_small,
    )

    frame = pack(request(members=[{"rollout_index": i} for i in range(8)]))
    assert len(frame) <= SMALL_FRAME
    assert asyncio.run(read_request(frame)) == parse_request(unpack_bounded(frame))
    with pytest.raises(DecodeCostError, match="extension type"):
        asyncio.run(read_request(b"\x92\xd4\x05\x00\x01"))
    maps = b"\xdd" + (SMALL_FRAME - 5).to_bytes(4, "big") + b"\x80" * (SMALL_FRAME - 5)
    assert unpack_small(maps) == unpack_bounded(maps)
    with pytest.raises(ValueError, match="not small"):
        unpack_small(maps + b"\x80" * 8)


async def test_a_large_frame_decodes_with_the_loop_running_every_few_steps(monkeypatch):
    """The stepped decode paces its turns as validation does: after every ``DECODE_STEP_BYTES``
    step when each takes ``TURN_S``, and never more than ``TURN_STEPS`` steps apart however
    quick they are; the frame decodes to what a whole decode gives."""
    from verifiers.workers.protocol import (
        DECODE_STEP_BYTES,
        pack,
        unpack_bounded,
        unpack_bounded_in_steps,
    )

    frame = pack({"rows": [{"q": "x" * 100}] * 40_000})
    steps = len(frame) // DECODE_STEP_BYTES
    assert steps > 4 * TURN_STEPS

    async def decoded_with_turns() -> tuple[object, int]:
        turns, done = 0, False

        async def other() -> None:
            nonlocal turns
            while not done:
                await asyncio.sleep(0)
                turns += 1

        ticker = asyncio.create_task(other())
        await asyncio.sleep(0)
        try:
            value = await unpack_bounded_in_steps(frame)
        finally:
            done = True
            await ticker
        return value, turns

    monkeypatch.setattr(stepped_validation, "TURN_S", 0.0)
    value, every = await decoded_with_turns()
    assert value == unpack_bounded(frame) and every >= steps - 1
    monkeypatch.setattr(stepped_validation, "TURN_S", 3600.0)
    value, paced = await decoded_with_turns()
    assert value == unpack_bounded(frame)
    assert steps // TURN_STEPS - 1 <= paced <= steps // TURN_STEPS + 1, (steps, paced)


@pytest.mark.parametrize(
    "rows",
    [
        [{}] * 1_400_000,  # empty maps: ~145x their size decoded
        [[]] * 1_400_000,  # empty lists
        [{i % 100: i % 100} for i in range(400_000)],  # maps of small numbers
        [{"question": "q" * 400, "answer": "a"}] * 4_000,  # rows of text: decodes
    ],
    ids=["empty maps", "empty lists", "small maps", "text rows"],
)
def test_a_frame_decoded_in_steps_is_charged_as_one_decoded_at_once(rows):
    """A frame decoded in steps (over ``STEPPED_FRAME``) has its hooks charge without counting
    entries (stepped validation looks at the request itself): it is refused, or decoded, as the
    bounded decode of the whole frame refuses or decodes it."""
    from verifiers.workers.protocol import (
        STEPPED_FRAME,
        DecodeCostError,
        pack,
        unpack_bounded,
        unpack_bounded_in_steps,
    )

    frame = pack({"request_type": "run_group", "group_inputs": rows})
    assert len(frame) > STEPPED_FRAME
    try:
        whole = unpack_bounded(frame, [0])
    except DecodeCostError as refused:
        with pytest.raises(DecodeCostError) as also:
            asyncio.run(unpack_bounded_in_steps(frame))
        assert str(also.value) == str(refused)
    else:
        assert asyncio.run(unpack_bounded_in_steps(frame)) == whole
