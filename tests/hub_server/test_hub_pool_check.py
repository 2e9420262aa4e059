"""The PostgreSQL pool's check of a connection it hands out (``engine.check_pooled``): no round
trip where nothing arrived on the connection while it sat idle, the pool's own check where
something did, and a connection the server ended refused, against a real server."""

from __future__ import annotations

import select
from pathlib import Path

import pytest


def _sent(conn, path: Path, check) -> str:
    """What libpq wrote to the server while ``check(conn)`` ran (its protocol trace)."""
    with open(path, "w") as trace:
        conn.pgconn.trace(trace.fileno())
        try:
            check(conn)
        finally:
            conn.pgconn.untrace()
    return path.read_text()


def _until_readable(conn) -> None:
    ready = select.poll()
    ready.register(conn.fileno(), select.POLLIN | select.POLLHUP)
    assert ready.poll(5000), "nothing arrived on the connection"


def test_a_quiet_connection_is_handed_out_without_a_round_trip_and_an_ended_one_never(
    _postgres_and_s3, tmp_path: Path
) -> None:
    psycopg = pytest.importorskip("psycopg")
    from hub_server.db.engine import check_pooled

    pg, _ = _postgres_and_s3
    url = pg.database()
    with psycopg.connect(url, autocommit=True) as conn, psycopg.connect(
        url, autocommit=True
    ) as other:
        assert _sent(conn, tmp_path / "quiet", check_pooled) == ""  # nothing to the server

        conn.execute("LISTEN hub_pool_check")  # something arrives while it sits idle
        other.execute("NOTIFY hub_pool_check")
        _until_readable(conn)
        assert "Query" in _sent(conn, tmp_path / "notified", check_pooled)  # the pool's check
        assert conn.execute("SELECT 1").fetchone()[0] == 1  # and the connection still serves

        other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        _until_readable(conn)  # the server's word that it ended the session, then the end
        with pytest.raises(psycopg.OperationalError):
            check_pooled(conn)
