"""Admission of uploads, shared fairly between the users who push.

The hub reads and checks as many uploads at once as it has upload workers; the rest wait
before their bodies are read. An admitted upload holds its slot while its body arrives, and a
body may take as long as it averages 16 KiB/s (50 MiB: about an hour). With one plain semaphore
a single ``publish`` token holding every slot with slow bodies (an outside attack trickled four
50 MiB pushes at 80 KB/s) kept every other user's push, eval and dataset waiting for as long as
it liked. Here one holder (a user) holds at most all slots but one, so another user's upload is
admitted while it waits on its own; a waiting holder is admitted in arrival order among those
who may be.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, deque
from collections.abc import AsyncIterator, Hashable


class UploadSlots:
    """``total`` slots; each holder at most ``total - 1`` of them (all of one, when there is one).
    Used on one event loop; nothing here awaits while it changes the counts, so a cancelled
    waiter or holder never leaks a slot."""

    def __init__(self, total: int) -> None:
        self.total = max(1, total)
        self.per_holder = max(1, self.total - 1)
        self._held: Counter[Hashable] = Counter()
        self._free = self.total
        self._waiting: deque[tuple[Hashable, asyncio.Future[None]]] = deque()

    def _may_take(self, holder: Hashable) -> bool:
        return self._free > 0 and self._held[holder] < self.per_holder

    def _take(self, holder: Hashable) -> None:
        self._free -= 1
        self._held[holder] += 1

    def _give_back(self, holder: Hashable) -> None:
        self._free += 1
        self._held[holder] -= 1
        if not self._held[holder]:
            del self._held[holder]
        for waiter in list(self._waiting):  # in arrival order, each that may take one now
            if not waiter[1].done() and self._may_take(waiter[0]):  # done: cancelled, leaving
                self._waiting.remove(waiter)
                self._take(waiter[0])
                waiter[1].set_result(None)

    @contextlib.asynccontextmanager
    async def slot(self, holder: Hashable) -> AsyncIterator[None]:
        if self._may_take(holder):
            self._take(holder)
        else:
            admitted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            waiter = (holder, admitted)
            self._waiting.append(waiter)
            try:
                await admitted
            except BaseException:
                if admitted.done() and not admitted.cancelled():
                    self._give_back(holder)  # given a slot as it was cancelled
                else:
                    self._waiting.remove(waiter)
                raise
        try:
            yield
        finally:
            self._give_back(holder)
