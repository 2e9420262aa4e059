"""The catalog's generation read on the event loop, one query for every request waiting on it.

A cached search or environment page is served only if the catalog has not changed since it was
made: its generation (``catalog_state``, bumped by triggers in the same transaction as any change
to an environment row or, on PostgreSQL, to the evals) must be the current one, read by a query
that started after the request arrived; that makes a cached answer never stale, in any hub
process. On PostgreSQL that read is a network round trip, and through the thread pool each cost
a request ~0.4 ms of CPU (the hop, the pool, psycopg). Here the requests waiting on the loop
share it: one dedicated connection runs one read at a time, and every request that arrives while
a read is under way waits for the next one, which starts after all of them arrived. At
concurrency 32 one read answers many requests; alone, a request costs one read without a thread
hop. Where the connection is lost (a server restarting) the waiters get None and read through
the pool as before; a connect that failed is tried again at most once a second (a closed one at
once: the gate held a reconnect back for a second after every connect).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

RETRY_S = 1.0
GENERATION = "SELECT generation FROM catalog_state WHERE id=1"


class GenerationReads:
    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._next: asyncio.Future[int | None] | None = None  # the read not yet started
        self._serving = False
        self._task: asyncio.Task[None] | None = None  # the serving task (kept: tasks are weak)
        self._retry_at = 0.0

    async def generation(self) -> int | None:
        """The generation as read by a query that started after this call, or None where the
        dedicated connection is unavailable (then read it through the pool)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new serving loop: the old one's connection is not ours
            self._loop, self._conn, self._next, self._serving = loop, None, None, False
        if self._next is None:
            self._next = loop.create_future()
        waiting = self._next
        if not self._serving:
            self._serving = True
            self._task = loop.create_task(self._serve())
        return await asyncio.shield(waiting)  # one request cancelled cancels no one's read

    async def _serve(self) -> None:
        try:
            while self._next is not None:
                batch, self._next = self._next, None  # who arrives now waits for the next read
                value = None
                try:
                    value = await self._read()
                finally:  # cancelled at shutdown: the waiters read through the pool
                    batch.set_result(value)
        finally:
            self._serving = False

    async def _read(self) -> int | None:
        import psycopg

        try:
            if self._conn is None:
                if time.monotonic() < self._retry_at:  # a connect failed less than RETRY_S ago
                    return None
                try:
                    self._conn = await psycopg.AsyncConnection.connect(
                        self.url, autocommit=True, connect_timeout=5
                    )
                except psycopg.Error:
                    self._retry_at = time.monotonic() + RETRY_S
                    raise
            cursor = await self._conn.execute(GENERATION)
            row = await cursor.fetchone()
            return None if row is None else int(row[0])
        except psycopg.Error:
            await self.aclose()
            return None

    async def aclose(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()
