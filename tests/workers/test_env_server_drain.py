"""vf-env-server reads what is queued on its ROUTER without waiting, up to ``DRAIN`` messages a
turn of its event loop, and answers pings at once (``EnvServer.serve``): a burst of pipelined
pings, health requests, cancels and malformed messages is answered as one at a time was."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from verifiers.processes.server import free_port
from verifiers.workers.protocol import HEALTH_PING, pack, unpack
from verifiers.workers.server import DRAIN, EnvServer


async def test_a_burst_of_pings_requests_and_cancels_is_answered_each_once():
    import zmq
    import zmq.asyncio

    port, stop = free_port(), asyncio.Event()
    # health requests never reach the pool: it is only named (and asked whether it gave up)
    server = EnvServer(SimpleNamespace(env_id="none"), "127.0.0.1", port, None)
    serving = asyncio.create_task(server.serve(stop))
    context = zmq.asyncio.Context()
    dealer = context.socket(zmq.DEALER)
    try:
        await asyncio.sleep(0.3)
        dealer.connect(f"tcp://127.0.0.1:{port}")
        sent: dict[bytes, bytes] = {}
        for i in range(5 * DRAIN):
            sent[f"p{i}".encode()] = HEALTH_PING
            if i % 7 == 0:
                sent[f"h{i}".encode()] = pack({"request_type": "health"})
        for request_id, payload in sent.items():
            await dealer.send_multipart([request_id, payload])
            if request_id == b"p3":
                await dealer.send_multipart([b"nothing", b""])  # a cancel of nothing
                await dealer.send_multipart([b"x", b"y", b"z"])  # not a request: ignored
        answers: dict[bytes, dict] = {}
        while len(answers) < len(sent):
            assert await dealer.poll(30_000), f"{len(answers)} of {len(sent)} answered"
            request_id, reply = await dealer.recv_multipart()
            assert request_id not in answers, f"{request_id!r} answered twice"
            answers[request_id] = unpack(reply)
        assert set(answers) == set(sent)
        assert all(answer["success"] for answer in answers.values()), answers
        assert not await dealer.poll(300)  # nothing more: the cancel and the stray answered none
        await dealer.send_multipart([b"last", HEALTH_PING])
        assert await dealer.poll(30_000)
        assert (await dealer.recv_multipart())[0] == b"last"
    finally:
        dealer.close(linger=0)
        context.term()
        stop.set()
        await serving
