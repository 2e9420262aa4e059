"""The wire's short cuts on the default path (``verifiers.workers.protocol``): a reply is packed
from its fields when msgpack knows every value in it, into the very bytes pydantic's dump gave
(and through the dump when a value needs it); ``receive_batch`` hands over a burst queued on a
ZeroMQ socket in one turn, in order, at most ``limit`` a turn, and waits for the first."""

from __future__ import annotations

import asyncio
import enum

import msgpack
import pytest
from pydantic import BaseModel

import verifiers as vf
from verifiers.types import State
from verifiers.workers.protocol import (
    DRAIN,
    Response,
    _default,
    pack,
    receive_batch,
    unpack,
)
from verifiers.workers.snapshot import snapshot


def dumped(message: BaseModel) -> bytes:
    """How every message was packed before the short cut: pydantic's dump, then msgpack."""
    return msgpack.packb(message.model_dump(mode="python"), default=_default, use_bin_type=True)


class Colour(enum.StrEnum):
    RED = "red"


class Point(BaseModel):
    x: int
    label: str | None = None


def finished_state() -> State:
    state = State(input={"prompt": [{"role": "user", "content": "hi"}], "answer": "4"})
    state.update(
        completion=[{"role": "assistant", "content": "4"}],
        reward=1.0,
        metrics={"exact": 1.0},
        timing={"generation_ms": 3.0},
        trajectory=[],
        extra={"tool": vf.Tool(name="add", description="Add.", parameters={"type": "object"})},
    )
    return state


@pytest.mark.parametrize(
    "response",
    [
        Response(outputs=[snapshot(finished_state()), snapshot(finished_state())]),
        Response(success=False, error="boom", fault="culprit"),
        Response(output={"tuple": (1, 2), "colour": Colour.RED, "bytes": b"\x00", "big": 2**40}),
        Response(outputs=[{"nested": {"deep": [1.5, None, True, "x"], 3: "int key"}}]),
    ],
    ids=["snapshots", "error", "tuple-enum-bytes", "nested"],
)
def test_a_plain_reply_packs_into_the_bytes_the_dump_gave(response):
    assert pack(response) == dumped(response)
    assert unpack(pack(response)) == unpack(dumped(response))


@pytest.mark.parametrize(
    "value",
    [Point(x=1), {1, 2}, frozenset({"a"})],
    ids=["model", "set", "frozenset"],
)
def test_a_reply_holding_a_value_only_the_dump_reads_is_packed_as_before(value):
    response = Response(outputs=[{"value": value, "other": [1, 2]}])
    assert pack(response) == dumped(response)
    # the model is dumped whole (its None field too), as pydantic dumped it
    if isinstance(value, Point):
        assert unpack(pack(response))["outputs"][0]["value"] == {"x": 1, "label": None}


def test_a_reply_with_a_value_nothing_can_pack_still_fails_as_before():
    response = Response(output={"when": object()})
    with pytest.raises(TypeError):
        dumped(response)
    with pytest.raises(TypeError):
        pack(response)


async def test_receive_batch_hands_over_a_queued_burst_in_order_and_waits_for_the_first():
    import zmq
    import zmq.asyncio

    context = zmq.asyncio.Context()
    router, dealer = context.socket(zmq.ROUTER), context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.IDENTITY, b"w")
    try:
        port = router.bind_to_random_port("tcp://127.0.0.1")
        dealer.connect(f"tcp://127.0.0.1:{port}")
        plain = zmq.Socket.shadow(router.underlying)
        # nothing queued: it waits for the first message, then takes it alone
        waiting = asyncio.create_task(receive_batch(router, plain))
        await asyncio.sleep(0.2)
        assert not waiting.done()
        await dealer.send_multipart([b"r0", b"first"])
        assert await asyncio.wait_for(waiting, 30) == [[b"w", b"r0", b"first"]]
        # a burst: every message once, in order, at most DRAIN a turn
        count = 2 * DRAIN + 5
        for i in range(count):
            await dealer.send_multipart([f"r{i}".encode(), b"x"])
        got: list[list[bytes]] = []
        while len(got) < count:
            batch = await asyncio.wait_for(receive_batch(router, plain), 30)
            assert 1 <= len(batch) <= DRAIN
            got += batch
        assert [frames[1] for frames in got] == [f"r{i}".encode() for i in range(count)]
        assert all(frames[0] == b"w" and frames[2] == b"x" for frames in got)
        # read to the end: the next call waits again, and a later message still wakes it
        later = asyncio.create_task(receive_batch(router, plain, limit=4))
        await asyncio.sleep(0.2)
        assert not later.done()
        await dealer.send_multipart([b"late", b"y"])
        assert await asyncio.wait_for(later, 30) == [[b"w", b"late", b"y"]]
    finally:
        dealer.close(linger=0)
        router.close(linger=0)
        context.term()
