"""Connections to the hub's database, SQLite or PostgreSQL, behind one small interface.

Statements are written once, with ``?`` placeholders, and run on either backend: the PostgreSQL
side rewrites them to ``%s``. A unique-constraint violation surfaces as ``Conflict`` on both, so
the repository turns races (two pushes of one version) into clean 409s. Nothing is cached in
process: every read goes to the database, so several hub processes on one PostgreSQL agree.

Both backends take the same values: a parameter one of them cannot hold (text with NUL, which
PostgreSQL's ``text`` refuses while SQLite stores it; a lone surrogate, which is not UTF-8; an
integer beyond 64 bits) is refused before the statement runs, on either, as a coded 400, and a
value the database refuses anyway (``DataError``, a key too large for its index) is a coded 400
too, never a 500. Routes check their fields first (``hub_server.services.names.check_text``), to name the
field; this is the net under every statement.
"""

from __future__ import annotations

import os
import select
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import fields
from functools import cache
from pathlib import Path
from typing import Any, Protocol, TypeVar

from packaging.utils import canonicalize_name, canonicalize_version

from hub_server.db.generation_reads import GenerationReads
from hub_server.errors import Unavailable, Unstorable

INT64 = range(-(2**63), 2**63)


class Conflict(Exception):
    """A unique constraint refused a row (another writer got there first)."""


def unstorable(text: str) -> str | None:
    """What in ``text`` one of the backends cannot store (a NUL character, a lone surrogate),
    described, or None."""
    if "\x00" in text:
        return "a NUL character (U+0000)"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"an unpaired surrogate (U+{ord(text[exc.start]):04X})"
    return None


def check_params(params: Sequence[Any]) -> tuple[Any, ...]:
    """``params`` as a tuple, once each is a value both backends store alike."""
    for value in params:
        if isinstance(value, str) and (bad := unstorable(value)) is not None:
            raise Unstorable(
                "invalid_text", f"a value contains {bad}, which the hub does not store"
            )
        if isinstance(value, int) and value not in INT64:
            raise Unstorable("invalid_number", f"{value} is out of range (64-bit integers)")
    return tuple(params)


def refused_value() -> Unstorable:
    """A value the database itself refused (its message names tables and indexes: not shown)."""
    return Unstorable(
        "invalid_value", "a value of the request cannot be stored (too large or malformed)"
    )


class Cursor(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    def pipeline(self) -> AbstractContextManager[Any]: ...


Row = TypeVar("Row")


@cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


def typed(cls: type[Row], row: Any) -> Row:
    """A database row (sqlite3's or PostgreSQL's) as the dataclass ``cls``: the columns it
    declares, by name; a query's other columns are left out. (The names are looked up once per
    class: ``dataclasses.fields`` on every row was a tenth of an environment page's render.)"""
    return cls(**{name: row[name] for name in _field_names(cls)})  # type: ignore[arg-type]


def version_key(version: str) -> str:
    """One spelling per PEP 440 version: ``1.0`` = ``1.0.0`` = ``1.0.0.0``."""
    return canonicalize_version(version, strip_trailing_zero=True)


class SQLiteCursor:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        values = check_params(params)
        try:
            return self.db.execute(sql, values)
        except sqlite3.IntegrityError as exc:
            if "UNIQUE" in str(exc) or "PRIMARY KEY" in str(exc):
                raise Conflict(str(exc)) from exc
            raise
        except (OverflowError, sqlite3.DataError):
            raise refused_value() from None

    def pipeline(self) -> AbstractContextManager[Any]:
        """A local read has no round trips to save: statements run as they are sent."""
        return nullcontext()

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement over many rows (a bulk load: ``db.bulk_load``)."""
        values = [check_params(row) for row in rows]
        try:
            self.db.executemany(sql, values)
        except sqlite3.IntegrityError as exc:
            if "UNIQUE" in str(exc) or "PRIMARY KEY" in str(exc):
                raise Conflict(str(exc)) from exc
            raise


class SQLiteDatabase:
    """One SQLite file in WAL mode; one connection per thread; writers serialize (IMMEDIATE)."""

    dialect = "sqlite"
    generation_reads = None  # a local read costs less than sharing one (``generation_reads``)

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        # private to the hub's user: it holds private environments' READMEs, user names and
        # token hashes. SQLite gives the -wal and -shm files the database file's mode, so one
        # made 0600 (and an existing one made so) keeps all three from other local users.
        try:
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
            os.chmod(path, 0o600, follow_symlinks=False)
        except OSError as exc:
            raise SystemExit(f"cannot open the hub database {path}: {exc}") from None

    def _connection(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(
                self.path, timeout=30, isolation_level=None, check_same_thread=False
            )
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")  # WAL: durable at checkpoints, never corrupt
            db.execute("PRAGMA foreign_keys=ON")
            db.create_function("canon_name", 1, canonicalize_name, deterministic=True)
            db.create_function("canon_version", 1, version_key, deterministic=True)
            self._local.db = db
        return db

    @contextmanager
    def transaction(self) -> Iterator[SQLiteCursor]:
        db = self._connection()
        db.execute("BEGIN IMMEDIATE")
        try:
            yield SQLiteCursor(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[SQLiteCursor]:
        yield SQLiteCursor(self._connection())

    @contextmanager
    def schema_change(self) -> Iterator[SQLiteCursor]:
        """A transaction for migrations that rebuild tables (SQLite's documented ALTER
        procedure): foreign keys are not enforced inside it, since dropping a parent table
        with them on deletes its rows first and cascades into every child table; before the
        commit, ``PRAGMA foreign_key_check`` must find no violation that was not there before.
        (``PRAGMA foreign_keys`` is a no-op inside a transaction: it is set around it.)"""
        db = self._connection()
        db.execute("PRAGMA foreign_keys=OFF")
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                before = {tuple(r) for r in db.execute("PRAGMA foreign_key_check").fetchall()}
                yield SQLiteCursor(db)
                after = {tuple(r) for r in db.execute("PRAGMA foreign_key_check").fetchall()}
                if after - before:
                    raise RuntimeError(
                        f"a schema change broke foreign keys (table, rowid, parent, key): "
                        f"{sorted(after - before)[:5]}"
                    )
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.execute("PRAGMA foreign_keys=ON")

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.close()
            self._local.db = None


@cache
def _postgres_sql(sql: str) -> str:
    return sql.replace("?", "%s")


class PostgresCursor:
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        from psycopg import errors

        values = check_params(params)
        try:
            return self.conn.execute(_postgres_sql(sql), values or None)
        except errors.UniqueViolation as exc:
            raise Conflict(str(exc)) from exc
        except (errors.DataError, errors.ProgramLimitExceeded):
            raise refused_value() from None

    def pipeline(self) -> AbstractContextManager[Any]:
        """Statements executed inside are sent together and answered in one round trip (libpq's
        pipeline mode); their cursors are read after the block."""
        return self.conn.pipeline()

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """One statement over many rows, sent in one pipeline (a bulk load: ``db.bulk_load``)."""
        from psycopg import errors

        values = [check_params(row) for row in rows]
        try:
            with self.conn.cursor() as cursor:
                cursor.executemany(_postgres_sql(sql), values)
        except errors.UniqueViolation as exc:
            raise Conflict(str(exc)) from exc


@contextmanager
def _unavailable() -> Iterator[None]:
    """A server gone mid-request (restarted, failed over, the pool out of connections) is
    ``Unavailable`` (503, send again), not a 500: its transaction was rolled back with the
    connection."""
    import psycopg
    from psycopg_pool import PoolTimeout

    try:
        yield
    except (psycopg.OperationalError, PoolTimeout) as exc:
        raise Unavailable(
            "database_unavailable", f"the database is unavailable ({type(exc).__name__}); try again"
        ) from None


def check_pooled(conn: Any) -> None:
    """The pool's check of a connection it hands out, without a round trip where nothing
    arrived on it while it sat idle: a server that stops or restarts ends its sessions (a
    termination message, then the socket's end), which leaves the socket readable. Where
    something did arrive (that, a notice, a notification), the check is the pool's own: an
    empty query, which reads it. The round trip had been one of a pooled read's two on every
    request, and under load each round trip waits for two processes to be scheduled."""
    from psycopg import OperationalError
    from psycopg_pool import ConnectionPool

    if conn.closed or conn.broken:
        raise OperationalError("the connection is closed")
    ready = select.poll()
    ready.register(conn.fileno(), select.POLLIN | select.POLLERR | select.POLLHUP)
    if ready.poll(0):
        ConnectionPool.check_connection(conn)


class PostgresDatabase:
    """A psycopg 3 connection pool; each transaction is one database transaction."""

    dialect = "postgresql"

    def __init__(self, url: str, max_size: int = 16) -> None:
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        self.url = url
        self.max_size = max_size  # connections: as many reads at once as can run
        self.generation_reads = GenerationReads(url)
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            kwargs={"row_factory": dict_row, "autocommit": True},
            open=True,
            # a connection is checked as it is handed out: after a server restart the pool's
            # dead connections are replaced, not handed to a request
            check=check_pooled,
            timeout=10,
        )

    @contextmanager
    def transaction(self) -> Iterator[PostgresCursor]:
        with _unavailable(), self.pool.connection() as conn, conn.transaction():
            yield PostgresCursor(conn)

    @contextmanager
    def read(self) -> Iterator[PostgresCursor]:
        with _unavailable(), self.pool.connection() as conn:
            yield PostgresCursor(conn)

    def close(self) -> None:
        self.pool.close()


Database = SQLiteDatabase | PostgresDatabase


def open_database(url: str | None, data_dir: Path) -> Database:
    """``None`` (SQLite in ``data_dir``), ``sqlite:///PATH`` or ``postgresql://...``."""
    if url is None:
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return SQLiteDatabase(data_dir / "hub.sqlite3")
    if url.startswith("sqlite:///"):
        return SQLiteDatabase(Path(url.removeprefix("sqlite:///")))
    if url.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg  # noqa: F401
        except ImportError:
            from verifiers.installs.extras import install_hint

            hint = install_hint("hub-postgres", "psycopg[binary] psycopg-pool")
            raise SystemExit(f"--db postgresql://... needs psycopg: {hint}") from None
        return PostgresDatabase(url)
    raise ValueError(f"--db {url!r}: use postgresql://USER@HOST:PORT/DB or sqlite:///PATH")
