"""One environment worker process: it loads the environment and answers the pool's requests.

``python -m verifiers.workers.process PARENT_PID`` with its settings as JSON on stdin: a fresh interpreter
(no inherited sockets, event loops or threads, and unlike ``multiprocessing``'s spawn it never
re-runs the caller's script, guarded or not). It dies with its parent however the parent dies:
the kernel's parent-death signal (Linux), and a watcher thread that exits when the parent's pid
goes away. A heartbeat thread writes the time into a file the pool reads, every 0.2 s; it keeps
beating while a blocking reward function holds the event loop, so the pool tells a busy worker
from a dead or hung one; and while the loop is held, another thread names the group whose code
holds it (``verifiers.workers.stall``): the pool convicts that group when it outlives its time
limit, instead of running it and the groups beside it again alone to find out which it was;
and, sent ``stall.GROWN_SIGNAL`` by a pool that found it over its memory budget, it writes its
frames, from which the pool reads the group whose code was running (``stall.read_grower``).

``python -m verifiers.workers.process PARENT_PID --fork FD`` is a pool's template instead: a
fresh interpreter too, that imports the worker's modules and the environment's module once, then
forks one worker per entry of its settings' ``workers`` (each then loads the environment and
serves as above, dying with the template, which dies with the caller) and reports on FD each
worker's pid (``forked IDENTITY PID``) and how it ended (``exited PID CODE``): the workers share
one interpreter start and one import of everything instead of paying each their own (about a
second of CPU each, the larger part of a short vf-eval run's cost). It forks with only its main
thread, and holds no socket, event loop or client at that point; when importing the
environment started a thread, each forked worker execs a fresh interpreter instead.

A caller that has loaded the environment itself may instead fork its workers from its own
process (``WorkerPool.fork``, what vf-eval does): each serves its copy of the caller's
environment (``serve_forked``) and costs no interpreter start, import or load at all.

A caller may launch its workers before it knows the environment's release (vf-eval does, first
thing, so their start overlaps its own): such a worker loads the environment as its package says
and names the release in its ready message, which the pool checks. A worker whose stdin ends
before any settings exits quietly.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import json
import os
import select
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from verifiers.processes.die_with_parent import arm_parent_death_signal, name_process

READY = b"ready"
FAILED = b"failed"
# what ``ps``, ``top`` and ``psutil.Process.name()`` call them (a worker forked from vf-eval
# keeps vf-eval's command line: the name tells them apart)
WORKER_NAME = "vf-env-worker"
TEMPLATE_NAME = "vf-env-template"


# What a worker imports to serve its first group, imported before a fork (the template's, or
# the caller's in ``WorkerPool.fork``) so the workers share one import instead of each its own.
# (aiohttp: a group's first model call imported it in each worker, most of a quarter second of
# CPU per fork)
WORKER_MODULES = (
    "aiohttp",
    "zmq.asyncio",
    "verifiers.workers.runtime",
    "verifiers.clients.openai_chat_completions_client",
    "verifiers.envs.generation",
    "verifiers.results.outputs",
)


def import_worker_modules() -> None:
    for name in WORKER_MODULES:
        importlib.import_module(name)


def _die_with_parent(parent_pid: int) -> None:
    if not arm_parent_death_signal(parent_pid, signal.SIGKILL):
        os._exit(1)

    def watch() -> None:
        while True:
            if os.getppid() != parent_pid:
                os._exit(1)
            time.sleep(0.5)

    threading.Thread(target=watch, name="vf-worker-parent-watch", daemon=True).start()


BEAT = struct.Struct("d")


def write_beat(path: str) -> None:
    with open(path, "r+b", buffering=0) as f:
        f.write(BEAT.pack(time.monotonic()))


def read_beat(path: str) -> float | None:
    """The last heartbeat (``time.monotonic()``, the same clock for every process), 0 if none;
    None when it cannot be read now (no descriptor left: a flood of connections is not a hung
    worker, and killing one would leave no descriptor to start its replacement)."""
    try:
        with open(path, "rb") as f:
            return BEAT.unpack(f.read(BEAT.size))[0]
    except (FileNotFoundError, struct.error):
        return 0.0
    except OSError:
        return None


def _beat(path: str) -> None:
    def stamp() -> None:
        while True:
            with contextlib.suppress(OSError):
                write_beat(path)
            time.sleep(0.2)

    threading.Thread(target=stamp, name="vf-worker-heartbeat", daemon=True).start()


def main() -> None:
    """The worker process's entry point: the parent's pid as its argument (watched before
    anything is imported), then settings as one JSON object on stdin (``--fork FD``: the
    template, see the module docstring)."""
    template = sys.argv[2:3] == ["--fork"]
    if template:  # the parent-death signal only: no thread may run when it forks
        if not arm_parent_death_signal(int(sys.argv[1]), signal.SIGKILL):
            os._exit(1)
    elif len(sys.argv) > 1:
        _die_with_parent(int(sys.argv[1]))
    if template:  # read unbuffered: what follows the first line is read from fd 0 later
        unread = b""
        while b"\n" not in unread and (chunk := os.read(0, 65536)):
            unread += chunk
        first, _, unread = unread.partition(b"\n")
        if first.strip():
            _fork_workers(json.loads(first), int(sys.argv[3]), unread)
        return
    line = sys.stdin.readline()
    if not line.strip():  # the caller ended before it needed this worker
        return
    settings = json.loads(line)
    if len(sys.argv) <= 1:
        _die_with_parent(int(settings["parent_pid"]))
    _run(settings)


def _fork_workers(settings: dict[str, Any], report_fd: int, unread: bytes) -> None:
    """The template: import once, fork the workers, report their pids and their ends; then
    fork each worker asked for on stdin (``unread``: what was read of it past the settings)."""
    if settings.get("release"):
        os.environ["VF_API_VERSION"] = settings["release"]
    import_worker_modules()  # what every worker imports, imported once here
    from verifiers.loading.loader import import_environment

    with contextlib.suppress(Exception):  # a worker's own load says what is wrong with it
        import_environment(settings["env_id"])
    # An environment's import that started threads (a pool, a monitor) left locks that a fork
    # would copy mid-use: each worker then replaces the fork by a fresh interpreter at once.
    fresh = threading.active_count() > 1
    report = os.fdopen(report_fd, "w", buffering=1)
    template = os.getpid()

    def fork(worker: dict[str, Any]) -> None:
        pid = os.fork()
        if pid == 0:
            if fresh:
                _exec_fresh({**settings, **worker}, report_fd, template)
            _run_forked({**settings, **worker}, report_fd, template)
        report.write(f"forked {worker['identity']} {pid}\n")

    name_process(TEMPLATE_NAME)
    for worker in settings["workers"]:
        fork(worker)
    # Ctrl-C reaches the whole process group: the workers' ends are still to be reported
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fork_asked_for(fork, report, unread)


def fork_asked_for(fork: Callable[[dict[str, Any]], None], report: TextIO, unread: bytes) -> None:
    """A template's loop, until its stdin ends and its workers did: report every worker that
    ended on ``report``; call ``fork`` for each asked for on stdin (``unread``: what was read of
    it already)."""

    # later workers (replacements, workers that run suspects alone) are asked for on stdin, one
    # JSON object a line, as long as the caller keeps it open: a fork costs milliseconds where a
    # fresh interpreter costs a second of CPU
    def fork_asked() -> None:
        nonlocal unread
        *lines, unread = unread.split(b"\n")
        for line in lines:
            if line.strip():
                fork(json.loads(line))

    asking = True
    fork_asked()
    while True:
        while True:  # report every worker that ended
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                if not asking:  # every worker ended and none will be asked for
                    return
                break
            if pid == 0:
                break
            report.write(f"exited {pid} {os.waitstatus_to_exitcode(status)}\n")
        if not asking:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.wait()
                report.write(f"exited {pid} {os.waitstatus_to_exitcode(status)}\n")
            continue
        if not select.select([0], [], [], 0.05)[0]:
            continue
        chunk = os.read(0, 65536)
        asking = bool(chunk)
        unread += chunk
        fork_asked()


def _exec_fresh(settings: dict[str, Any], report_fd: int, template: int) -> None:
    """A forked worker that becomes a fresh worker interpreter (same pid, so the template's
    report still holds), its settings on stdin as any worker's: nothing runs between the fork
    and the exec but writing them to an in-memory file."""
    try:
        os.close(report_fd)
        stdin = os.memfd_create("settings")  # a file, not a pipe: no size to block on
        os.write(stdin, (json.dumps(settings) + "\n").encode())
        os.lseek(stdin, 0, os.SEEK_SET)
        os.dup2(stdin, 0)
        os.execv(sys.executable, [sys.executable, "-m", "verifiers.workers.process", str(template)])
    finally:
        os._exit(1)  # only when the exec failed


def _run_forked(settings: dict[str, Any], report_fd: int, template: int) -> None:
    """A forked worker: never returns into the template's code (``os._exit``)."""
    os.close(report_fd)  # the template's report is its own
    _serve_then_exit(settings, template)


def serve_forked(settings: dict[str, Any], env: Any) -> None:
    """A worker forked from the caller itself right after it loaded ``env``
    (``WorkerPool.fork``): it serves its copy of that environment, never returning into the
    caller's code (``os._exit``: none of the caller's ``finally`` blocks or exit handlers run
    here). The caller's SIGTERM handler and stdin are not the worker's (SIGINT's disposition
    is inherited, as an interpreter started from the caller inherits it: ignored stays
    ignored)."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        _serve_then_exit(settings, int(settings["parent_pid"]), env)
    finally:
        os._exit(1)  # only when something before serving raised


def _serve_then_exit(settings: dict[str, Any], parent: int, env: Any = None) -> None:
    code = 1
    try:
        _die_with_parent(parent)
        _run(settings, env)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _run(settings: dict[str, Any], env: Any = None) -> None:
    import logging

    # the caller's level (vf-eval -v: debug), to the stderr the worker shares with it; forced:
    # a worker forked from the caller inherits its handlers, without the worker's name
    from verifiers.logging_setup import NOISY_LOGGERS, log_to_stderr

    log_to_stderr(
        int(settings.get("log_level") or logging.WARNING),
        f"%(levelname)s %(name)s [worker {settings['identity']}]: %(message)s",
        force=True,
    )

    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from verifiers.processes.collector import serve_collection
    from verifiers.workers.stall import frames_path, stall_path

    serve_collection()
    name_process(WORKER_NAME)
    _beat(settings["heartbeat"])
    if settings.get("release"):
        os.environ["VF_API_VERSION"] = settings["release"]
    asyncio.run(
        _serve(
            settings["env_id"],
            settings.get("env_args") or {},
            settings["address"],
            settings["identity"].encode(),
            env,
            stall_path(settings["heartbeat"]),
            frames_path(settings["heartbeat"]),
        )
    )


async def _serve(
    env_id: str,
    env_args: dict[str, Any],
    address: str,
    identity: bytes,
    env: Any = None,
    stall_file: str | None = None,
    frames_file: str | None = None,
) -> None:
    import zmq
    import zmq.asyncio

    from verifiers.workers.protocol import Response, pack, receive_batch, unpack
    from verifiers.workers.runtime import WorkerRuntime
    from verifiers.workers.stall import GROUP, LoopWatch, watch_growth

    context = zmq.asyncio.Context()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.IDENTITY, identity)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(address)
    try:
        runtime = WorkerRuntime(env_id, env_args, env)
    except BaseException as exc:  # tell the pool why, then stop
        await sock.send_multipart([FAILED, f"{type(exc).__name__}: {exc}".encode()])
        sock.close()
        context.term()
        return
    release = getattr(runtime.env, "release", None)
    await sock.send_multipart([READY, str(release or "").encode()])
    tasks: dict[bytes, asyncio.Task[None]] = {}
    watch = LoopWatch(stall_file) if stall_file else None
    if watch is not None:  # says which group's code holds the loop when it stops turning
        watch.start()
    if frames_file:  # and, over its memory budget, which group's code was running
        watch_growth(frames_file)

    async def answer(request_id: bytes, payload: bytes) -> None:
        try:
            response = await runtime.handle(unpack(payload))
        except asyncio.CancelledError:
            response = Response(success=False, error="cancelled")
        except Exception as exc:  # the environment raised outside a rollout: an error reply
            response = Response(success=False, error=f"{type(exc).__name__}: {exc}")
        finally:
            tasks.pop(request_id, None)
        await sock.send_multipart([request_id, pack(response)])

    def take(frames: list[bytes]) -> None:
        if len(frames) != 2:
            return
        request_id, payload = frames
        if payload == b"":
            task = tasks.get(request_id)
            if task is not None:
                task.cancel()
            return
        group = contextvars.copy_context()  # its tasks, and theirs, are this request's
        group.run(GROUP.set, request_id)
        tasks[request_id] = asyncio.create_task(answer(request_id, payload), context=group)

    plain: Any = zmq.Socket.shadow(sock.underlying)  # what is queued, read without a wait
    try:
        while True:
            for frames in await receive_batch(sock, plain):
                take(frames)
    finally:
        if watch is not None:
            watch.stop()
        for task in tasks.values():
            task.cancel()
        await runtime.close()
        sock.close()
        context.term()


if __name__ == "__main__":
    main()
