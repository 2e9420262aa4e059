"""Where sandboxes come from: the strongest isolation this machine offers (probed once), and a
provider that keeps a pool of prepared sandboxes so a rollout never waits for one to boot.

Pooled sandboxes are started ahead with their own uid, budget and disk, and never reused: a
rollout's sandbox is always fresh.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import shutil
import subprocess
from functools import cache

from verifiers.sandbox.base import (
    IsolationMode,
    SandboxLimits,
    SandboxProvider,
    SandboxUnavailableError,
)
from verifiers.sandbox.local import LocalSandbox
from verifiers.sandbox.view import uid_drop_possible
from verifiers.sandbox.zygote import prestart as prestart_zygote
from verifiers.sandbox.zygote import usable as zygote_usable

logger = logging.getLogger("verifiers.sandbox")


@cache
def probe_mode() -> IsolationMode:
    """The strongest isolation this machine offers (cached per process)."""
    bwrap = shutil.which("bwrap")
    if bwrap:
        args = [bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--die-with-parent"]
        if os.getuid() != 0:
            args.append("--unshare-user")
        try:
            if subprocess.run([*args, "true"], capture_output=True, timeout=10).returncode == 0:
                return "bwrap"
        except (OSError, subprocess.TimeoutExpired):
            pass
    if landlock_abi() >= 1 and (os.getuid() != 0 or uid_drop_possible("landlock")):
        return "landlock"
    raise SandboxUnavailableError(
        "no sandbox isolation is available: install bubblewrap (Debian: apt-get install bubblewrap) or use a "
        "kernel with Landlock enabled; for trusted code only, pass mode='unsafe'"
    )


def landlock_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return max(int(libc.syscall(444, None, 0, 1)), 0)  # LANDLOCK_CREATE_RULESET_VERSION


class LocalSandboxProvider(SandboxProvider):
    """Pooled local sandboxes. ``mode="auto"`` picks bwrap, else landlock, else refuses."""

    def __init__(
        self,
        mode: str = "auto",
        limits: SandboxLimits | None = None,
        pool_size: int = 2,
        zygote: bool = True,
    ) -> None:
        """``zygote=False`` starts every bubblewrap sandbox with bubblewrap itself instead of
        forking it from the zygote (``verifiers.sandbox.zygote``): as confined, slower to start."""
        self.mode: IsolationMode
        match mode:
            case "auto":
                self.mode = probe_mode()
            case "bwrap" | "landlock" | "unsafe":
                self.mode = mode
            case _:
                raise ValueError(
                    f"sandbox mode must be auto, bwrap, landlock or unsafe, got {mode!r}"
                )
        if self.mode == "unsafe":
            logger.warning(
                "sandbox mode 'unsafe': code runs WITHOUT isolation; use only for trusted code"
            )
        else:
            logger.info("sandbox isolation: %s", self.mode)
        self.limits = limits or SandboxLimits()
        self.pool_size = pool_size
        self.zygote = zygote
        if zygote and self.mode == "bwrap" and zygote_usable():
            prestart_zygote()  # while the run loads its data, before its first sandbox
        self._pool: list[LocalSandbox] = []
        self._filling: set[asyncio.Task] = set()
        # every sandbox this provider started and has not seen destroyed, held strongly: close()
        # must reach each one, even one whose creator dropped it
        self._sandboxes: set[LocalSandbox] = set()

    async def _start(self, limits: SandboxLimits) -> LocalSandbox:
        self._sandboxes = {s for s in self._sandboxes if not s.destroyed}
        sandbox = LocalSandbox(self.mode, limits, zygote=self.zygote)
        self._sandboxes.add(sandbox)
        return await sandbox.start()

    def _refill(self) -> None:
        missing = self.pool_size - len(self._pool) - len(self._filling)
        for _ in range(max(missing, 0)):
            task = asyncio.ensure_future(self._start(self.limits))
            self._filling.add(task)
            task.add_done_callback(self._pooled)

    def _pooled(self, task: asyncio.Task) -> None:
        self._filling.discard(task)
        if not task.cancelled() and task.exception() is None:
            self._pool.append(task.result())

    async def warm(self) -> None:
        """Start the pool now (otherwise it fills after the first create)."""
        self._refill()
        if self._filling:
            await asyncio.gather(*self._filling, return_exceptions=True)

    async def create(self, limits: SandboxLimits | None = None) -> LocalSandbox:
        limits = limits or self.limits
        sandbox = None
        if limits == self.limits:
            while self._pool and sandbox is None:
                candidate = self._pool.pop()
                if candidate.process is not None and candidate.process.returncode is None:
                    sandbox = candidate
                else:
                    await candidate.destroy()
            if self.pool_size:
                self._refill()
        return sandbox or await self._start(limits)

    async def close(self) -> None:
        # Starts in flight are awaited, not cancelled: a start cancelled while its process is
        # being spawned leaves that process running with nothing holding it.
        pool_size, self.pool_size = self.pool_size, 0  # a create() racing this starts no pool
        try:
            while self._filling:
                await asyncio.gather(*self._filling, return_exceptions=True)
            await asyncio.gather(
                *(s.destroy() for s in list(self._sandboxes)), return_exceptions=True
            )
            self._sandboxes = {s for s in self._sandboxes if not s.destroyed}
            self._pool.clear()
        finally:  # still usable afterwards: the next create() starts a pool again
            self.pool_size = pool_size
