"""Workers forked from one template process (``python -m verifiers.workers.process PID --fork``),
or from the caller itself: the caller's side.

A caller that has just loaded the environment itself (vf-eval) forks its workers from its own
process (``fork_here``, when ``fork_safe``): each worker starts with a copy of the loaded
environment, so the pool costs no interpreter start, import or load at all.

A pool launched ahead of its run (``WorkerPool.launch``, what vf-eval does) starts one template
that imports the worker's modules and the environment's module once and forks the workers from
it, instead of N interpreters that each import everything (about a second of CPU each). Each
worker is still a process of its own that shares nothing live with the caller or the others.
The workers are the template's children, not the caller's: :class:`ForkedProcess` stands in for
their ``subprocess.Popen`` (pid, poll, signals, wait), from what the template reports on a pipe.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time
from typing import IO, Any, Protocol

from verifiers.processes.die_with_parent import arm_parent_death_signal, name_process
from verifiers.workers.process import (
    TEMPLATE_NAME,
    fork_asked_for,
    import_worker_modules,
    serve_forked,
)


class WorkerProcess(Protocol):
    """What the pool uses of a worker's process: a ``subprocess.Popen`` or a ``ForkedProcess``."""

    @property
    def pid(self) -> int: ...
    def poll(self) -> int | None: ...
    def send_signal(self, sig: int) -> None: ...
    def terminate(self) -> None: ...
    def kill(self) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...


def can_fork() -> bool:
    """Linux only: the template and its workers die with the caller by the parent-death signal."""
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def open_channels() -> set[int]:
    """This process's open sockets and pipes (Linux; empty elsewhere). A worker forked from the
    caller copies them: one an environment's load opened (a database connection, a server's
    pipe) would be shared by every worker, so such an environment's workers are not forked
    from the caller (``fork_safe``)."""
    found = set()
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError, ValueError):
                mode = os.fstat(int(name)).st_mode
                if stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode):
                    found.add(int(name))
    return found


def fork_safe(channels_before_load: set[int]) -> bool:
    """Whether workers may be forked from this process, which has just loaded an environment:
    Linux, no thread but this one (a fork copies a running thread's locks mid-use) and no
    socket or pipe opened since ``channels_before_load`` (``open_channels``)."""
    return can_fork() and threading.active_count() == 1 and open_channels() <= channels_before_load


class ChildProcess:
    """A worker forked from this very process (``fork_here``): ``Popen``'s pid, poll, signals
    and wait over ``os.waitpid``, under a lock (the pool's watcher thread and ``close()`` both
    ask; a pid reaped once may be someone else's after)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.args = pid, [f"worker {pid}"]
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is None:
                try:
                    done, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:  # reaped elsewhere: gone, how is unknown
                    self.returncode = -signal.SIGKILL
                else:
                    if done:
                        self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode

    def send_signal(self, sig: int) -> None:
        with self._lock:
            if self.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.005)
        return code


def fork_here(
    settings: dict[str, Any], workers: list[tuple[str, str]], env: Any
) -> tuple[dict[str, ChildProcess], Template]:
    """Fork one worker per ``(identity, heartbeat)`` from this process, each serving its copy
    of ``env`` (``verifiers.workers.process.serve_forked``), and a template beside them that
    forks more such workers when asked (replacements, workers for suspects: a fork each, where
    a template started at the first death cost an interpreter's start, import and load, seconds
    in which the dead worker's groups waited); call only when ``fork_safe``.
    What a worker imports to serve is imported here first, once for all of them.
    Objects that exist now are frozen out of the collector first, so the workers' collections
    do not write to (and copy) every page they share with this process."""
    import_worker_modules()
    gc.freeze()
    children = {}
    try:
        for identity, heartbeat in workers:
            pid = os.fork()
            if pid == 0:
                serve_forked({**settings, "identity": identity, "heartbeat": heartbeat}, env)
            children[identity] = ChildProcess(pid)
        template = Template.forked_here(settings, env)
    finally:
        gc.unfreeze()
    return children, template


def _serve_as_template(settings: dict[str, Any], env: Any, report_fd: int) -> None:
    """The template forked from the caller (``Template.forked_here``), its requests on fd 0:
    each worker it forks serves its copy of ``env`` as the first workers do, and dies with the
    template, which dies with the caller. Never returns into the caller's code."""
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # its workers' ends are still to report
        if not arm_parent_death_signal(int(settings["parent_pid"]), signal.SIGKILL):
            return
        name_process(TEMPLATE_NAME)
        report = os.fdopen(report_fd, "w", buffering=1)
        template = os.getpid()

        def fork(worker: dict[str, Any]) -> None:
            pid = os.fork()
            if pid == 0:
                os.close(report_fd)  # the template's report is its own
                serve_forked({**settings, **worker, "parent_pid": template}, env)
            report.write(f"forked {worker['identity']} {pid}\n")

        fork_asked_for(fork, report, b"")
        code = 0
    finally:
        os._exit(code)


class ForkedProcess:
    """A worker forked by the template. Its pid is 0 until the template reports it (a signal
    sent before then is delivered when it does); ``returncode`` is what the template reaped
    (``-N`` for a signal, as ``Popen`` says it), or SIGKILL's when the template itself ended
    first (its workers die with it)."""

    def __init__(self, template: Template, identity: str) -> None:
        self.template, self.identity = template, identity
        self.args = [f"worker {identity}"]
        self.pid = 0
        self.returncode: int | None = None
        self._signal: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def send_signal(self, sig: int) -> None:
        with self.template.changed:
            if self.returncode is not None:
                return  # reaped: the pid may be someone else's now
            if not self.pid:
                self._signal = signal.SIGKILL if self._signal == signal.SIGKILL else sig
                return
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def wait(self, timeout: float | None = None) -> int:
        with self.template.changed:
            if not self.template.changed.wait_for(lambda: self.returncode is not None, timeout):
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        assert self.returncode is not None
        return self.returncode

    def _forked(self, pid: int) -> None:  # under the template's lock
        self.pid = pid
        if self._signal is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, self._signal)


class Template:
    """The template process, forking one worker per ``(identity, heartbeat)``; ``settings``
    are a worker's (``WorkerPool``), sent on stdin as a worker's are."""

    def __init__(self, settings: dict[str, Any], workers: list[tuple[str, str]]) -> None:
        read_fd, write_fd = os.pipe()
        try:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "verifiers.workers.process",
                    str(os.getpid()),
                    "--fork",
                    str(write_fd),
                ],
                stdin=subprocess.PIPE,
                pass_fds=(write_fd,),
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        assert process.stdin is not None
        self._attach(process, process.stdin, read_fd, workers)
        listed = [{"identity": identity, "heartbeat": beat} for identity, beat in workers]
        process.stdin.write(json.dumps({**settings, "workers": listed}).encode() + b"\n")
        process.stdin.flush()  # kept open: later workers are asked for on it (fork())

    @classmethod
    def forked_here(cls, settings: dict[str, Any], env: Any) -> Template:
        """A template forked from this process, which has loaded ``env`` (``fork_here``, under
        its conditions): it costs a fork, and the workers it forks cost a fork each."""
        ask_read, ask_write = os.pipe()
        report_read, report_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(ask_write)
            os.close(report_read)
            os.dup2(ask_read, 0)
            os.close(ask_read)
            _serve_as_template(settings, env, report_write)
        os.close(ask_read)
        os.close(report_write)
        template = cls.__new__(cls)
        template._attach(ChildProcess(pid), os.fdopen(ask_write, "wb"), report_read, [])
        return template

    def _attach(
        self, process: WorkerProcess, stdin: IO[bytes], read_fd: int, workers: list[tuple[str, str]]
    ) -> None:
        self.process, self._stdin = process, stdin
        self.changed = threading.Condition()
        self._ended = False  # the template process ended (reported by its pipe's end)
        self.workers = {identity: ForkedProcess(self, identity) for identity, _ in workers}
        self._reader = threading.Thread(
            target=self._read, args=(read_fd,), name="vf-worker-template", daemon=True
        )
        self._reader.start()

    def _read(self, fd: int) -> None:
        by_pid: dict[int, ForkedProcess] = {}
        with os.fdopen(fd, "rb") as report:
            for line in report:
                word, name, number = line.decode().split()
                with self.changed:
                    if word == "forked" and name in self.workers:
                        by_pid[int(number)] = self.workers[name]
                        self.workers[name]._forked(int(number))
                    elif word == "exited" and int(name) in by_pid:
                        by_pid[int(name)].returncode = int(number)
                    self.changed.notify_all()
        # the template ended: its workers die with it (the parent-death signal), unreported
        with self.changed:
            self._ended = True  # fork() asks it for no more
            workers = list(self.workers.values())
        for worker in workers:
            deadline = time.monotonic() + 5
            while worker.pid and worker.returncode is None and time.monotonic() < deadline:
                try:
                    os.kill(worker.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.01)
        with self.changed:
            for worker in workers:
                if worker.returncode is None:
                    worker.returncode = -signal.SIGKILL
            self.changed.notify_all()

    def fork(self, identity: str, heartbeat: str) -> ForkedProcess | None:
        """One more worker, forked (milliseconds, where a fresh interpreter costs a second of
        CPU); None when the template is gone (killed: its workers died with it), and a fresh
        interpreter must do."""
        stdin = self._stdin
        with self.changed:
            if stdin.closed or self._ended:
                return None
            worker = self.workers[identity] = ForkedProcess(self, identity)
        line = json.dumps({"identity": identity, "heartbeat": heartbeat}).encode() + b"\n"
        try:
            stdin.write(line)
            stdin.flush()
        except (OSError, ValueError):  # the template is gone (or stopping)
            with self.changed:
                self.workers.pop(identity, None)
            return None
        return worker

    def stop(self) -> None:
        """End the template (its workers were stopped first: their ends are reported)."""
        with contextlib.suppress(OSError):
            self._stdin.close()
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(1)
        self._reader.join(6)
