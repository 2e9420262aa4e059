"""Which blobs the committed rows refer to: what the orphan collector must never remove."""

from __future__ import annotations

from hub_server.db.engine import Cursor, Database

# every column that holds a blob store key, by table
BLOB_COLUMNS = {
    "files": ("blob", "metadata_blob"),
    "evals": ("metadata_blob", "results_blob"),
    "datasets": ("card_blob", "data_blob"),
}


def referenced_blobs(database: Database) -> set[str]:
    """The keys of every blob a committed row refers to (one scan of each table)."""
    keys: set[str] = set()
    with database.read() as db:
        for table, columns in BLOB_COLUMNS.items():
            for column in columns:
                rows = db.execute(
                    f"SELECT DISTINCT {column} AS k FROM {table} WHERE {column} IS NOT NULL"
                ).fetchall()
                keys.update(row["k"] for row in rows)
    return keys


def is_referenced(db: Cursor, key: str) -> bool:
    """Whether a row refers to blob ``key`` (indexed lookups), read in the caller's transaction."""
    return any(
        db.execute(f"SELECT 1 FROM {table} WHERE {column}=? LIMIT 1", (key,)).fetchone()
        for table, columns in BLOB_COLUMNS.items()
        for column in columns
    )
