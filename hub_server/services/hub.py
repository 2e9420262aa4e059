"""The hub's state: its settings, database rooms, blob store and authenticator, wired once.

Nothing here caches what another hub process could change: the only in-process memory is the
rendered simple-index pages, keyed by the environment's id and ``serial`` (which every publish,
yank and delete bumps in the same transaction), the viewer-independent part of environment pages,
keyed by the environment's whole row and its evals' mark (``page_key``), with the whole page as
every anonymous viewer sees it beside it (the same key and "anonymous"), and downloads not yet
written, which are increments. An environment's id is never given out again once it is deleted (AUTOINCREMENT on
SQLite, a sequence on PostgreSQL), so a page cached for a deleted environment can never be served
for a new one; deleting drops what this process kept of it all the same (its pages, its pending
downloads, the search answers that list it). On PostgreSQL the rows environment pages are keyed
by are kept under the catalog's generation, which any change to an environment or an eval moves.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool

from hub_server.background.upload_pool import UPLOAD_WORKERS, UploadPool
from hub_server.db.accounts import Accounts
from hub_server.db.attachments import Attachments
from hub_server.db.blob_leases import BlobLeases, LeasedBlobs
from hub_server.db.blobs import BlobStore, StagingArea, open_blob_store
from hub_server.db.catalog import Catalog
from hub_server.db.challenges import LoginChallenges
from hub_server.db.clock import today
from hub_server.db.engine import PostgresDatabase, open_database
from hub_server.db.index import IndexReads
from hub_server.db.page_reads import PageReads
from hub_server.db.rows import EnvironmentRow, IndexHead, VersionRow
from hub_server.db.schema import migrate
from hub_server.db.search import Search
from hub_server.db.staged_evals import StagedEvals
from hub_server.errors import HubError
from hub_server.services.auth import Authenticator
from hub_server.services.names import check_name, is_name, normalize_version
from hub_server.services.upload_slots import UploadSlots
from hub_server.settings import HubSettings

T = TypeVar("T")
Env = TypeVar("Env", EnvironmentRow, IndexHead)

INDEX_CACHE_SIZE = 2048
PAGE_ROWS = 4096
PAGE_CACHE_CHARS = 64 * 1024 * 1024  # environment pages' content and the READMEs in their keys
DOWNLOAD_FLUSH_S = 10.0


def index_key(env: IndexHead, as_json: bool) -> tuple[int, str, int, bool]:
    """What a simple-index page is cached under: the environment's id, which no other
    environment ever gets, and its ``serial``, which every change to its files bumps. Its
    ``created_at`` is part of the key too, for a store replaced under a running hub (a backup
    restored, a sequence reset by hand), where ids could repeat."""
    return (env.id, env.created_at, env.serial, as_json)


def page_key(env: EnvironmentRow, evals_mark: tuple[int, int]) -> tuple[Any, ...]:
    """What the viewer-independent part of an environment's web page is cached under: its id
    first (``forget_environment`` drops by it), its whole row (``serial`` moves with every
    publish, yank and version deletion; the row holds the README, description, tags, downloads
    and visibility) and its evals' mark (``Attachments.environment_with_evals_mark``): any
    change is a new key."""
    return (env.id, env, evals_mark)


class Hub:
    def __init__(
        self,
        data_dir: str | Path | HubSettings,
        db: str | None = None,
        blobs: str | None = None,
        s3_endpoint: str | None = None,
        upload_workers: int = UPLOAD_WORKERS,
    ) -> None:
        settings = (
            data_dir
            if isinstance(data_dir, HubSettings)
            else HubSettings(data_dir=Path(data_dir), db=db, blobs=blobs, s3_endpoint=s3_endpoint)
        )
        self.settings = settings
        self.database = open_database(settings.db, settings.data_dir)
        migrate(self.database)
        self.accounts = Accounts(self.database)
        self.catalog = Catalog(self.database)
        self.index = IndexReads(self.database)
        self.pages = PageReads(self.database)
        self.search = Search(self.database)
        self.attachments = Attachments(self.database)
        self.blobs: BlobStore = open_blob_store(
            settings.blobs, settings.data_dir, settings.s3_endpoint
        )
        self.leases = BlobLeases(self.database)  # what keeps the collector off uploads' blobs
        self.staging = StagingArea(self.blobs)  # staged pushes' bytes, beside the blob store
        self.staged_evals = StagedEvals(self.database)  # Prime's `prime eval push`, until finalize
        self.auth = Authenticator(self.accounts)
        self.logins = LoginChallenges(self.database, self.accounts)
        self.index_cache: OrderedDict[tuple, bytes] = OrderedDict()
        self.page_cache: OrderedDict[tuple, tuple[str, int]] = OrderedDict()  # (content, size)
        # pages' environment rows and evals' marks by (generation, owner, name), on PostgreSQL
        self.page_rows: OrderedDict[tuple, tuple[EnvironmentRow, tuple[int, int]]] = OrderedDict()
        self._page_chars = 0
        self._index_lock = threading.Lock()
        self._downloads: set[tuple[int, int, str]] = set()
        self._downloads_flushed = time.monotonic()
        self._downloads_lock = threading.Lock()
        self._uploads = UploadPool(settings, worker_hub, upload_workers) if upload_workers else None
        self._read_threads: ThreadPoolExecutor | None = None  # ``read``'s, on PostgreSQL
        self._upload_workers = upload_workers
        self._upload_slots: weakref.WeakKeyDictionary[Any, UploadSlots] = (
            weakref.WeakKeyDictionary()
        )

    def leased_blobs(self) -> LeasedBlobs:
        """What an upload stores its blobs through (``with hub.leased_blobs() as blobs``)."""
        return LeasedBlobs(self.leases, self.blobs)

    @contextlib.asynccontextmanager
    async def upload_slot(self, holder: int) -> AsyncIterator[None]:
        """Admission for an upload of the user ``holder``: as many at once as there are
        workers, so pushes queue before their bodies are read and the work a push leaves on
        the loop (reading and parsing its body) is bounded, whatever the number of pushers;
        one user holds all slots but one at most, so slow bodies of one user never keep
        another's push waiting (``UploadSlots``); reads are never queued."""
        loop = asyncio.get_running_loop()
        slots = self._upload_slots.get(loop)
        if slots is None:  # one per serving loop (its waiters' futures belong to it)
            slots = self._upload_slots[loop] = UploadSlots(self._upload_workers)
        async with slots.slot(holder):
            yield

    async def upload_work(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(hub, *args)``: an upload's work after its checks (archive validation, hashing,
        storing, the publish transaction), in worker processes at a lower CPU priority
        (``upload_pool``), so pushes never starve the index and search. With no workers
        (a worker's own hub), in a thread here."""
        if self._uploads is None:
            return await run_in_threadpool(fn, self, *args)
        return await self._uploads.run(fn, *args)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a read from an async route: inline on SQLite (an indexed local read costs less
        than a thread hop and never waits on writers in WAL mode), on PostgreSQL in one of the
        hub's read threads, as many as the pool has connections (a network round trip must not
        stall the event loop). Those threads are the executor's, not the framework's thread
        pool: its hop cost ~60 us of CPU a call at 32 at once, the executor's ~20 (the caller's
        context goes along, as there)."""
        database = self.database
        if not isinstance(database, PostgresDatabase):
            return fn(*args)
        if self._read_threads is None:
            self._read_threads = ThreadPoolExecutor(database.max_size, "hub-read")
        call = functools.partial(contextvars.copy_context().run, fn, *args)
        return await asyncio.get_running_loop().run_in_executor(self._read_threads, call)

    def create_user(self, name: str, is_admin: bool = False) -> str:
        check_name(name, "user")
        token, _ = self.accounts.create_user(name, is_admin)
        return token

    def cached_page(self, key: tuple, render: Any) -> bytes:
        body = self.index_cache.get(key)
        if body is None:
            body = render()
            with self._index_lock:
                self.index_cache[key] = body
                if len(self.index_cache) > INDEX_CACHE_SIZE:
                    self.index_cache.popitem(last=False)
        return body

    def cached_content_hit(self, key: tuple) -> str | None:
        hit = self.page_cache.get(key)
        return None if hit is None else hit[0]

    def cached_content(self, key: tuple, render: Callable[[], str]) -> str:
        """An environment page's content (``page_key``), rendered once per change. The cache is
        bounded in characters, not entries: a README may hold a megabyte, and the key holds it
        beside the page made of it."""
        hit = self.page_cache.get(key)
        if hit is not None:
            return hit[0]
        content = render()
        size = len(content) + len(key[1].readme or "")
        with self._index_lock:
            old = self.page_cache.pop(key, None)  # rendered by two requests at once
            self._page_chars += size - (old[1] if old else 0)
            self.page_cache[key] = (content, size)
            while self._page_chars > PAGE_CACHE_CHARS:
                self._page_chars -= self.page_cache.popitem(last=False)[1][1]
        return content

    # --- deleting: the rows, then what this process kept of them ---------------------------------
    def delete_environment(self, env: EnvironmentRow) -> None:
        self.catalog.delete_environment(env.id)
        self.forget_environment(env.id)

    def delete_version(self, env: EnvironmentRow, version_id: int) -> None:
        self.catalog.delete_version(env.id, version_id)
        self.forget_environment(env.id, pages_only=True)

    def forget_environment(self, env_id: int, pages_only: bool = False) -> None:
        """Drop this process's cached index pages of ``env_id`` and, unless it still exists
        (``pages_only``), its pending downloads and the search answers that list it."""
        with self._index_lock:
            for key in [k for k in self.index_cache if k[0] == env_id]:
                del self.index_cache[key]
            for key in [k for k in self.page_cache if k[0] == env_id]:
                self._page_chars -= self.page_cache.pop(key)[1]
        if pages_only:
            return
        with self._downloads_lock:
            self._downloads = {d for d in self._downloads if d[0] != env_id}
        self.search.forget(env_id)

    def environment(self, owner: str, name: str, user: Any) -> EnvironmentRow:
        """The environment row, or 404 (private environments do not exist for others; names
        outside the grammar exist for nobody, and are not looked up)."""
        row = self.catalog.environment(owner, name) if is_name(owner) and is_name(name) else None
        return self._readable(owner, name, row, user)

    def index_environment(self, owner: str, name: str, user: Any) -> IndexHead:
        """``environment`` as the simple index reads it (``IndexReads.head``), with the same
        checks and the same 404."""
        row = self.index.head(owner, name) if is_name(owner) and is_name(name) else None
        return self._readable(owner, name, row, user)

    def environment_for_page(
        self, owner: str, name: str, user: Any
    ) -> tuple[EnvironmentRow, tuple[int, int]]:
        """``environment`` and its evals' mark (``page_key``), read in one query, with the same
        checks; on PostgreSQL kept under the catalog's generation of the same snapshot, for
        ``known_for_page``."""
        found = (
            self.attachments.environment_with_evals_mark(owner, name)
            if is_name(owner) and is_name(name)
            else None
        )
        row, evals_mark, generation = found or (None, (0, 0), 0)
        if row is not None and self.database.generation_reads is not None:
            with self._index_lock:
                self.page_rows[(generation, owner, name)] = (row, evals_mark)
                while len(self.page_rows) > PAGE_ROWS:
                    self.page_rows.popitem(last=False)
        return self._readable(owner, name, row, user), evals_mark

    async def known_for_page(
        self, owner: str, name: str, user: Any
    ) -> tuple[EnvironmentRow, tuple[int, int]] | None:
        """``environment_for_page`` on the event loop, with the same checks, where the row was
        read at the current generation (``generation_reads``: a read shared with the other
        requests waiting); None where it was not, or on SQLite."""
        reads = self.database.generation_reads
        generation = await reads.generation() if reads is not None else None
        found = None if generation is None else self.page_rows.get((generation, owner, name))
        if found is None:
            return None
        return self._readable(owner, name, found[0], user), found[1]

    def _readable(self, owner: str, name: str, row: Env | None, user: Any) -> Env:
        if row is None or not self.auth.can_read(user, row):
            raise HubError(404, "environment_not_found", f"no environment {owner}/{name}")
        return row

    def version(self, env: EnvironmentRow, version: str) -> VersionRow:
        row = self.catalog.version(env.id, normalize_version(version))
        if row is None:
            raise HubError(
                404, "version_not_found", f"{env.owner}/{env.name} has no version {version}"
            )
        return row

    # --- downloads: once per user, environment and day; anonymous ones are not counted ----------
    def count_download(self, env_id: int, user_id: int | None) -> None:
        if user_id is None:
            return
        with self._downloads_lock:
            self._downloads.add((env_id, user_id, today()))
            due = time.monotonic() - self._downloads_flushed > DOWNLOAD_FLUSH_S
        if due:
            self.flush_downloads()

    def downloads_pending(self) -> bool:
        return bool(self._downloads)

    def flush_downloads(self) -> None:
        with self._downloads_lock:
            pending, self._downloads = self._downloads, set()
            self._downloads_flushed = time.monotonic()
        if pending:
            self.catalog.count_downloads(pending)

    def start_upload_workers(self) -> None:
        if self._uploads is not None:
            self._uploads.start()

    def close(self) -> None:
        if self._uploads is not None:
            self._uploads.close()
        if self._read_threads is not None:
            self._read_threads.shutdown(wait=True)
        self.flush_downloads()
        self.database.close()


def worker_hub(settings: HubSettings) -> Hub:
    """An upload worker's own hub: the same store, no workers of its own."""
    return Hub(settings, upload_workers=0)
