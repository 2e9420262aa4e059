"""A worker's word on what holds its event loop (``verifiers.workers.stall``), on a real loop and
thread: the group whose code blocks it is named, a task the group started is the group's, a
block outside any task names no one, and the report goes once the loop turns again; and a dump of
the stack (what a worker over its memory budget writes) names the group whose task runs."""

from __future__ import annotations

import asyncio
import contextvars
import faulthandler
import os
import time
from pathlib import Path

from verifiers.workers.stall import GROUP, STALL_S, LoopWatch, Stall, read_grower, read_stall


def _block_until_reported(path: str) -> Stall:
    """Hold the loop (as a sync reward would) until the worker's thread has reported it."""
    deadline = time.monotonic() + 30
    while (stall := read_stall(path)) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stall is not None, "no stall reported in 30 s"
    return stall


async def _in_group(group: bytes, coro_fn):
    """Run ``coro_fn()`` as a worker runs a request: in a task whose context names the group."""
    context = contextvars.copy_context()
    context.run(GROUP.set, group)
    return await asyncio.get_running_loop().create_task(coro_fn(), context=context)


def _still_there_after_turning(path: str) -> bool:
    """Whether the report is still there 30 s after the loop turns again (waited for here, in a
    thread, while the loop runs)."""
    deadline = time.monotonic() + 30
    while os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    return os.path.exists(path)


def _watched(tmp_path: Path, body) -> tuple[object, bool]:
    path = str(tmp_path / "w0.beat.stall")

    async def main():
        watch = LoopWatch(path)
        watch.start()
        try:
            result = await body(path)
            return result, await asyncio.to_thread(_still_there_after_turning, path)
        finally:
            watch.stop()

    return asyncio.run(main())


def test_the_group_whose_own_code_blocks_the_loop_is_named_and_the_report_goes_after(tmp_path):
    async def body(path):
        async def reward():
            return _block_until_reported(path)

        return await _in_group(b"r7", reward)

    before = time.monotonic()
    stall, left = _watched(tmp_path, body)
    assert isinstance(stall, Stall) and stall.group == b"r7"
    assert before <= stall.since <= stall.seen and stall.seen - stall.since >= STALL_S
    assert not left  # removed once the loop turned again


def test_a_task_a_group_started_is_that_groups_when_it_blocks_the_loop(tmp_path):
    async def body(path):
        async def rollout():
            return _block_until_reported(path)

        async def group():  # a group's rollouts run as tasks of their own
            return (await asyncio.gather(asyncio.ensure_future(rollout())))[0]

        return await _in_group(b"r8", group)

    stall, _ = _watched(tmp_path, body)
    assert isinstance(stall, Stall) and stall.group == b"r8"


def test_a_block_outside_any_task_names_no_group(tmp_path):
    async def body(path):
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Stall] = loop.create_future()
        loop.call_soon(lambda: done.set_result(_block_until_reported(path)))  # a plain callback

        async def waiting():  # a group's task, waiting while the callback blocks the loop
            return await done

        return await _in_group(b"r9", waiting)

    stall, _ = _watched(tmp_path, body)
    assert isinstance(stall, Stall) and stall.group is None


def test_a_task_started_outside_any_request_names_no_group(tmp_path):
    async def body(path):
        async def background():  # e.g. an environment's own housekeeping task
            return _block_until_reported(path)

        return await asyncio.get_running_loop().create_task(background())

    stall, _ = _watched(tmp_path, body)
    assert isinstance(stall, Stall) and stall.group is None


def test_an_unreadable_report_is_no_word(tmp_path):
    path = tmp_path / "w0.beat.stall"
    assert read_stall(str(path)) is None  # none written
    path.write_text('{"since": 1.0, "seen"')  # cut short
    assert read_stall(str(path)) is None
    path.write_text('{"since": 1.0, "seen": 2.0, "group": "zz"}')  # not hex
    assert read_stall(str(path)) is None


def _dump(path: str) -> tuple[int, bytes | None]:
    """Every thread's frames written to ``path`` as faulthandler writes them, and what they say."""
    with open(path, "ab") as frames:
        faulthandler.dump_traceback(frames, all_threads=True)
    return read_grower(path)


def test_a_dump_of_the_stack_names_the_group_whose_task_runs_and_none_outside(tmp_path):
    """What a worker over its memory budget writes on ``GROWN_SIGNAL`` (every thread's frames,
    from faulthandler's C handler): the group whose task (or a task it started) was running is
    named; frames from no request's task name no one."""
    path = str(tmp_path / "w0.beat.frames")

    async def main():
        watch = LoopWatch(str(tmp_path / "w0.beat.stall"))
        watch.start()
        try:

            async def reward():  # a rollout's task, started by the group's own task
                return _dump(path)

            async def group():
                return await asyncio.ensure_future(reward())

            named = await _in_group(b"r10", group)
            os.remove(path)
            return named, _dump(path)  # outside any request's task
        finally:
            watch.stop()

    (size, group), (_, outside) = asyncio.run(main())
    assert size > 0 and group == b"r10" and outside is None
