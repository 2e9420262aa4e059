"""vf-serve prepares bodies over 1 MiB in a child process: what the child answers is what the
server would have, the child's death fails at most the request it was preparing, and a fresh
child takes the next one."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from pathlib import Path

import orjson
import pytest

pytest.importorskip("transformers", reason="vf-serve needs the local extra (torch, transformers)")

from verifiers.asgi.json_api import APIError
from verifiers.serve.lanes import LARGE_BODY, PromptLanes
from verifiers.serve.prompts import Kind, Prepared, Prompts

PADDING = "p" * (2 * LARGE_BODY)  # an ignored field: what makes a body large
DIE = "die-while-preparing"
HOLD = "hold-until-released"
HOLD_ONCE = "hold-in-the-first-child:"  # then a path: the first child to see it creates it
RELEASE = threading.Event()


class DiesOnCue(Prompts):
    """Prompts whose process dies (as one killed for its memory would) on a marked body, that
    holds its thread until ``RELEASE`` on another (as a slow prompt would), and that holds the
    first process to see a third (so the test can kill it mid-body)."""

    def prepare(self, body: bytes, kind: Kind) -> Prepared:
        if DIE.encode() in body:
            os._exit(1)
        if HOLD.encode() in body:
            RELEASE.wait(60)
        if HOLD_ONCE.encode() in body:
            marker = Path(orjson.loads(body)["user"].split(HOLD_ONCE)[1])
            if not marker.exists():
                marker.write_text(str(os.getpid()))
                time.sleep(60)
        return super().prepare(body, kind)


def body(prompt: str, **extra: object) -> bytes:
    return orjson.dumps({"model": "tiny", "prompt": prompt, "max_tokens": 4, **extra})


def gone(pid: int, within: float = 30.0) -> bool:
    """Whether ``pid`` has exited and been reaped (the pool's manager thread reaps its child)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not Path(f"/proc/{pid}").exists():
            return True
        time.sleep(0.01)
    return False


def appears(path: Path, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return path.exists()


@pytest.fixture
def lanes(embedded_dir: Path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_dir)
    prompts = DiesOnCue(tokenizer, "tiny", {"tiny"}, 16384, len(tokenizer))
    lanes = PromptLanes(prompts)
    yield lanes
    RELEASE.set()  # nothing is left holding a thread, whatever failed
    lanes.close()


def child_of(lanes: PromptLanes) -> int:
    assert lanes.large is not None, "no large body has been prepared yet"
    (pid,) = lanes.large._processes  # one worker
    return pid


async def test_a_large_body_is_prepared_in_a_child_as_the_server_would(lanes):
    small = await lanes.prepare(body("Hello there", temperature=0.5), "text")
    assert lanes.large is None  # a server that never sees a large body starts no child
    large = await lanes.prepare(body("Hello there", temperature=0.5, user=PADDING), "text")
    assert large == small and child_of(lanes) != os.getpid()
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "n": 2}
    assert await lanes.prepare(orjson.dumps({**chat, "user": PADDING}), "chat") == (
        await lanes.prepare(orjson.dumps(chat), "chat")
    )
    for bad, status, needle in [  # the child's refusals reach the client whole
        (body("", user=PADDING), 400, "the prompt is empty"),
        ({"model": "other", "prompt": "Hi", "user": PADDING}, 404, "is not served here"),
        (b"{" + PADDING.encode(), 400, "not valid JSON"),
    ]:
        with pytest.raises(APIError) as refused:
            await lanes.prepare(bad if isinstance(bad, bytes) else orjson.dumps(bad), "text")
        assert refused.value.status == status and needle in refused.value.message


async def test_a_child_that_dies_fails_only_the_body_it_held_and_is_replaced(lanes):
    first = await lanes.prepare(body("Hi", user=PADDING), "text")
    dying = child_of(lanes)
    with pytest.raises(APIError) as died:  # it dies preparing this body, and so does the next
        await lanes.prepare(body("Hi", user=PADDING + DIE), "text")
    assert died.value.status == 500 and "died twice" in died.value.message
    assert gone(dying)
    assert await lanes.prepare(body("Hi", user=PADDING), "text") == first
    idle = child_of(lanes)
    assert idle != dying
    os.kill(idle, signal.SIGKILL)  # it dies between bodies: the next body is not failed
    assert gone(idle)
    assert await lanes.prepare(body("Hi", user=PADDING), "text") == first
    last = child_of(lanes)
    assert last not in (dying, idle)
    lanes.close()  # the server's end: its child is waited for
    assert gone(last, within=0.1)


async def test_a_body_whose_child_is_killed_under_it_is_prepared_by_the_next(lanes, tmp_path):
    """A child killed from outside (or dead while idle before the pool noticed) is not the
    body's fault: the body it held is prepared again in a fresh child and answered."""
    first = await lanes.prepare(body("Hi", user=PADDING), "text")
    marker = tmp_path / "held"
    held = asyncio.create_task(
        lanes.prepare(body("Hi", user=PADDING + HOLD_ONCE + str(marker)), "text")
    )
    assert await asyncio.to_thread(appears, marker)
    holder = int(marker.read_text())
    os.kill(holder, signal.SIGKILL)
    assert await asyncio.wait_for(held, 30) == first
    assert child_of(lanes) != holder


async def test_arguments_python_cannot_read_reach_the_template_as_text(lanes):
    """Tool-call arguments nested past Python's recursion limit, or holding a number of more
    digits than it converts, were a 500; the template now gets them as the text they came as."""
    for arguments in ["[" * 5000 + "]" * 5000, '{"n": ' + "7" * 5001 + "}"]:
        call = {"type": "function", "function": {"name": "f", "arguments": arguments}}
        messages = [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
        ]
        body = orjson.dumps({"model": "tiny", "messages": messages, "max_tokens": 1})
        assert (await lanes.prepare(body, "chat")).prompt_ids  # (this template drops calls)


async def test_a_client_has_one_body_in_each_lane_at_a_time(lanes):
    """Lanes are queues: one client's many bodies there made everyone else wait for all of them
    (19 s in an outside attack: 60 bodies just under 1 MiB, each 0.35 s to tokenize). Now a
    client's bodies take turns, so another client's body waits for at most one of them, and a
    body whose client hangs up while it waits for its turn goes at once."""
    RELEASE.clear()
    greedy = [
        asyncio.create_task(lanes.prepare(body(HOLD), "text", client="greedy")) for _ in range(6)
    ]
    other = await asyncio.wait_for(lanes.prepare(body("Hi"), "text", client="other"), 20)
    assert other.prompt_ids and not any(task.done() for task in greedy)
    assert lanes.turns["greedy", "small"].users == 6 and ("other", "small") not in lanes.turns
    for task in greedy[3:]:  # their client hung up
        task.cancel()
    await asyncio.gather(*greedy[3:], return_exceptions=True)
    assert lanes.turns["greedy", "small"].users == 3
    RELEASE.set()
    assert len({p.prompt_ids == other.prompt_ids for p in await asyncio.gather(*greedy[:3])}) == 1
    assert lanes.turns == {}


async def test_a_clients_next_body_is_handed_on_by_the_thread_not_the_event_loop(lanes):
    """A client's turn in the small lane passed through the event loop (a lock released there,
    the next waiter woken, its body submitted), each step waiting for the GIL behind the
    engine's thread: one client's 8 concurrent chats reached the engine one by one and cost
    1.1-1.25x the server CPU per request. Now the thread that finishes a body submits the
    client's next one: with the event loop held, all of them are prepared, still one at a
    time, and their callers are answered once it runs again."""
    real, guard = lanes.prompts.prepare, threading.Lock()
    running, most, finished = [0], [0], threading.Event()
    order: list[int] = []

    def one_at_a_time(raw: bytes, kind: Kind) -> Prepared:
        with guard:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            return real(raw, kind)
        finally:
            with guard:
                running[0] -= 1
                order.append(int(orjson.loads(raw)["user"]))
                if len(order) == 4:
                    finished.set()

    lanes.prompts.prepare = one_at_a_time
    tasks = [
        asyncio.create_task(lanes.prepare(body("Hi", user=str(i)), "text", client="one"))
        for i in range(4)
    ]
    await asyncio.sleep(0)  # each takes its place in the client's turn
    assert lanes.turns["one", "small"].users == 4
    assert finished.wait(30), f"the turn waited for the event loop: only {order} were prepared"
    assert order == [0, 1, 2, 3] and most[0] == 1
    assert all(p.prompt_ids for p in await asyncio.gather(*tasks)) and lanes.turns == {}


async def test_bodies_queued_behind_one_that_kills_the_child_are_not_failed(lanes):
    """The child's death failed every body queued for it. Now the child holds one body at a
    time, so the body it held when it died is the one that fails; the others, whatever their
    order, go to a fresh child."""
    deadly = lanes.prepare(body("Hi", user=PADDING + DIE), "text", client="a")
    others = [lanes.prepare(body("Hi", user=PADDING), "text", client=c) for c in "bcd"]
    first, *rest = await asyncio.gather(deadly, *others, return_exceptions=True)
    assert isinstance(first, APIError) and first.status == 500, first
    assert all(isinstance(result, Prepared) for result in rest), rest
