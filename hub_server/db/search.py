"""Search and listing: one page of what a viewer may see, and how many match, in SQL.

Costs that do not grow with the hub: full-text matches come from the search index (SQLite FTS5,
PostgreSQL's GIN over a tsvector); who may see an environment is part of SQLite's index (the
``access`` column: "public" and the owner as a token), so a count reads the index alone and
never looks rows up; a page walks the sort's index when many environments match. Answers are
cached per process under the catalog's generation, which triggers bump with every change to an
environment row in the same transaction: a cached answer is never stale, in any hub process,
and a repeated search costs one indexed read (on PostgreSQL shared by the requests waiting on the
event loop: ``generation_reads``).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any

from hub_protocol.wire import SORTS
from hub_server.db.catalog import Viewer
from hub_server.db.engine import Database, typed
from hub_server.db.rows import SummaryRow

ORDER_BY = {  # the SQL of each of hub_protocol.wire's SORTS
    "updated": "e.updated_at DESC, e.id DESC",
    "created": "e.created_at DESC, e.id DESC",
    "name": "e.owner, e.name",
    "downloads": "e.downloads DESC, e.id DESC",
}
assert tuple(ORDER_BY) == SORTS, "an order of the list with no SQL, or SQL for none"
FTS_MATCH = "e.id IN (SELECT rowid FROM environments_fts WHERE environments_fts MATCH ?)"
# Above this many matches a page is found faster along the sort's index than by sorting them all
# (measured at 10,000 environments: 5.4 -> 0.6 ms for a word in a quarter of them); below it,
# sorting the few matches beats walking an index that rarely meets one.
WALK_SORT_INDEX_ABOVE = 500
CACHE_ENTRIES = 1024  # answers kept per process (each a page of at most 100 rows)
SUMMARY_COLUMNS = (
    "e.id, e.owner, e.name, e.distribution, e.visibility, e.description, e.tags, "
    "e.latest_version, e.created_at, e.updated_at, e.downloads, e.serial"
)


Answer = tuple[list[SummaryRow], int]


def search_terms(q: str) -> list[str]:
    """The query's words: runs of letters and digits, as both backends index them (SQLite's
    unicode61 tokenizer; PostgreSQL's column after ``PG_SEARCH_TEXT``), so "env-99", "v1.2" and
    "my_env" find the same environments on either."""
    return re.findall(r"[^\W_]+", q.lower())[:8]


def fts_access(viewer: Viewer) -> str:
    """The FTS5 condition for what ``viewer`` may see: the same rule as ``visible``, in the
    terms of the index's ``access`` column ("public" for public environments, "o" + the owner's
    name in hex for every one)."""
    if viewer.sees_all:
        return ""
    allowed = ["access:public", *(f"access:o{ns.encode().hex()}" for ns in viewer.namespaces)]
    return f" AND ({' OR '.join(allowed)})"


def visible(viewer: Viewer) -> tuple[list[str], list[Any]]:
    if viewer.sees_all:
        return [], []
    if not viewer.namespaces:
        return ["e.visibility='public'"], []
    marks = ",".join("?" * len(viewer.namespaces))
    return [f"(e.visibility='public' OR e.owner IN ({marks}))"], list(viewer.namespaces)


class Search:
    def __init__(self, database: Database) -> None:
        self.database = database
        self.postgres = database.dialect == "postgresql"
        self._cache: OrderedDict[tuple, Answer] = OrderedDict()
        self._lock = threading.Lock()

    def generation(self) -> int:
        with self.database.read() as db:
            row = db.execute("SELECT generation FROM catalog_state WHERE id=1").fetchone()
        return row["generation"]

    def cached(self, viewer: Viewer, *query: Any) -> Answer | None:
        """The answer if this exact search was made since the last change (one indexed read)."""
        return self._hit((self.generation(), viewer, *query))

    async def known(self, viewer: Viewer, *query: Any) -> Answer | None:
        """``cached`` on the event loop, on PostgreSQL: the generation from a read shared with
        the other requests waiting (``generation_reads``); None where it gave none, or on
        SQLite (then ask ``cached``)."""
        reads = self.database.generation_reads
        generation = await reads.generation() if reads is not None else None
        return None if generation is None else self._hit((generation, viewer, *query))

    def _hit(self, key: tuple) -> Answer | None:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
        return hit

    def forget(self, env_id: int) -> None:
        """Drop the answers that list a deleted environment (a newer generation makes them
        unreachable already; this frees what they held of it at once)."""
        with self._lock:
            for key in [
                k for k, (rows, _) in self._cache.items() if any(r.id == env_id for r in rows)
            ]:
                del self._cache[key]

    def page(
        self,
        viewer: Viewer,
        q: str | None,
        owner: str | None,
        tag: str | None,
        sort: str,
        page: int,
        per_page: int,
    ) -> Answer:
        """One page of what ``viewer`` may see (sorted by ``sort``) and how many match."""
        query = (q, owner, tag, sort, page, per_page)
        key = (self.generation(), viewer, *query)  # read before the answer: never newer
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return hit
        answer = self._compute(viewer, query)
        with self._lock:
            self._cache[key] = answer
            while len(self._cache) > CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return answer

    def _compute(self, viewer: Viewer, query: tuple) -> Answer:
        q, owner, tag, sort, page, per_page = query
        where, params = visible(viewer)
        match = None
        if owner:
            where.append("e.owner=?")
            params.append(owner)
        if tag:
            where.append("e.id IN (SELECT env_id FROM environment_tags WHERE tag=?)")
            params.append(tag)
        if q is not None and q.strip():
            terms = search_terms(q)
            if not terms:
                return [], 0
            if self.postgres:
                where.append("e.search @@ to_tsquery('simple', ?)")
                params.append(" & ".join(f"{t}:*" for t in terms))
            else:
                match = " ".join(f'"{t}"*' for t in terms) + fts_access(viewer)
                where.append(FTS_MATCH)
                params.append(match)
        clause = " AND ".join(where) or "1=1"
        with self.database.read() as db:
            if match is not None and not owner and not tag:  # the index alone knows the count
                total = db.execute(
                    "SELECT COUNT(*) AS n FROM environments_fts WHERE environments_fts MATCH ?",
                    (match,),
                ).fetchone()["n"]
            else:
                total = db.execute(
                    f"SELECT COUNT(*) AS n FROM environments e WHERE {clause}", params
                ).fetchone()["n"]
            if total > WALK_SORT_INDEX_ABOVE:
                # many matches: walk the sort's index and stop at the page instead of sorting
                # every match (SQLite would look the matches up by rowid, then sort them all)
                clause = clause.replace(FTS_MATCH, "+" + FTS_MATCH)
            rows = db.execute(
                f"SELECT {SUMMARY_COLUMNS} FROM environments e WHERE {clause} "
                f"ORDER BY {ORDER_BY[sort]} LIMIT ? OFFSET ?",
                [*params, per_page, (page - 1) * per_page],
            ).fetchall()
        return [typed(SummaryRow, row) for row in rows], total
