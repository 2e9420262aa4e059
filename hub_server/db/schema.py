"""The hub's schema, per backend, as numbered migrations; each applies once, in order.

SQLite keeps its number in ``PRAGMA user_version`` (hubs made before these rooms upgrade in place:
migration 8 backfills the normalized keys, the module index and the search index). PostgreSQL
keeps it in ``hub_schema`` and takes an advisory lock while migrating, so several hub processes
starting at once migrate the database exactly once.

What the schema guarantees by itself, so races end in a constraint and not in a corrupt store:
one environment per normalized name and owner (``name_key``), one version per PEP 440 version
(``version_key``), one file per filename in an environment, one eval per run and version. No id
is ever given out twice, also after its row is deleted (``SURROGATE_IDS``: AUTOINCREMENT on
SQLite since v12, ``BIGSERIAL`` sequences on PostgreSQL; no statement inserts an id of these
tables), so nothing keyed by an id (a cached page, a link, a token id to revoke) can come to mean
another row.

The ``modules`` table (SQLite v8, PostgreSQL v1) is no longer read or written: an environment
installs only its own import name, so the hub keeps no index of who installs what. It stays so
that a hub process of the previous release, still serving during a rolling upgrade, finds it; a
later migration drops it.

Over 400 lines, not split: the migrations are one numbered sequence per backend, and each
backend's list is read beside the other's when a migration is added.
"""

from __future__ import annotations

from typing import Any

SQLITE = [
    """
    CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, is_admin INTEGER NOT NULL DEFAULT 0,
                        created_at TEXT NOT NULL);
    CREATE TABLE teams (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, created_at TEXT NOT NULL);
    CREATE TABLE team_members (team_id INTEGER NOT NULL REFERENCES teams(id), user_id INTEGER NOT NULL REFERENCES users(id),
                               role TEXT NOT NULL, PRIMARY KEY (team_id, user_id));
    CREATE TABLE tokens (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id), name TEXT NOT NULL,
                         token_hash TEXT UNIQUE NOT NULL, scopes TEXT NOT NULL, created_at TEXT NOT NULL);
    CREATE TABLE environments (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL, distribution TEXT NOT NULL,
                               visibility TEXT NOT NULL, description TEXT, tags TEXT NOT NULL DEFAULT '[]', readme TEXT,
                               created_at TEXT NOT NULL, updated_at TEXT NOT NULL, UNIQUE (owner, name));
    CREATE TABLE versions (id INTEGER PRIMARY KEY, env_id INTEGER NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
                           version TEXT NOT NULL, created_at TEXT NOT NULL, yanked INTEGER NOT NULL DEFAULT 0,
                           yanked_reason TEXT, content_hash TEXT NOT NULL, requires_python TEXT, dependencies TEXT NOT NULL,
                           summary TEXT, UNIQUE (env_id, version));
    CREATE TABLE files (id INTEGER PRIMARY KEY, version_id INTEGER NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
                        filename TEXT NOT NULL, kind TEXT NOT NULL, sha256 TEXT NOT NULL, size INTEGER NOT NULL,
                        blob TEXT NOT NULL, metadata_blob TEXT, metadata_sha256 TEXT, upload_time TEXT NOT NULL);
    CREATE UNIQUE INDEX files_unique ON files (version_id, filename);
    CREATE TABLE evals (id INTEGER PRIMARY KEY, version_id INTEGER NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
                        uploaded_by TEXT NOT NULL, created_at TEXT NOT NULL, model TEXT, summary TEXT NOT NULL,
                        num_rollouts INTEGER NOT NULL, metadata_blob TEXT NOT NULL, results_blob TEXT NOT NULL);
    """,
    "ALTER TABLE environments ADD COLUMN downloads INTEGER NOT NULL DEFAULT 0;",
    "ALTER TABLE tokens ADD COLUMN expires_at TEXT; ALTER TABLE tokens ADD COLUMN revoked_at TEXT;",
    "ALTER TABLE versions ADD COLUMN top_level TEXT NOT NULL DEFAULT '[]';",
    "ALTER TABLE evals ADD COLUMN run_id TEXT; CREATE UNIQUE INDEX evals_run ON evals (version_id, run_id);",
    """CREATE TABLE datasets (id INTEGER PRIMARY KEY, version_id INTEGER NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
                              uploaded_by TEXT NOT NULL, created_at TEXT NOT NULL, rows INTEGER NOT NULL,
                              filter TEXT NOT NULL, models TEXT NOT NULL, card_blob TEXT NOT NULL, data_blob TEXT NOT NULL,
                              data_sha256 TEXT NOT NULL, UNIQUE (version_id, data_sha256));""",
    """CREATE TABLE sessions (session_hash TEXT PRIMARY KEY, token_id INTEGER NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,
                              created_at TEXT NOT NULL, expires_at TEXT NOT NULL);""",
    # v8: costs that do not grow with the hub. Normalized keys (constraints instead of scans), the
    # latest version and an index serial on the environment row, tags and modules as indexed
    # tables, FTS5 search, files keyed by environment, reward histograms stored with each eval,
    # downloads counted once per user and day.
    """
    ALTER TABLE environments ADD COLUMN name_key TEXT;
    UPDATE environments SET name_key = canon_name(name);
    CREATE UNIQUE INDEX environments_name_key ON environments (owner, name_key);
    ALTER TABLE environments ADD COLUMN latest_version TEXT;
    ALTER TABLE environments ADD COLUMN serial INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX environments_updated ON environments (updated_at);
    CREATE INDEX environments_created ON environments (created_at);
    CREATE INDEX environments_downloads ON environments (downloads);
    CREATE INDEX environments_owner ON environments (owner, name);
    CREATE TABLE environment_tags (env_id INTEGER NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
                                   tag TEXT NOT NULL, PRIMARY KEY (env_id, tag));
    CREATE INDEX environment_tags_tag ON environment_tags (tag, env_id);
    INSERT OR IGNORE INTO environment_tags (env_id, tag) SELECT e.id, j.value FROM environments e, json_each(e.tags) j;
    ALTER TABLE versions ADD COLUMN version_key TEXT;
    UPDATE versions SET version_key = canon_version(version);
    CREATE UNIQUE INDEX versions_key ON versions (env_id, version_key);
    ALTER TABLE files ADD COLUMN env_id INTEGER REFERENCES environments(id) ON DELETE CASCADE;
    UPDATE files SET env_id = (SELECT env_id FROM versions v WHERE v.id = files.version_id);
    CREATE UNIQUE INDEX files_env_filename ON files (env_id, filename);
    CREATE TABLE modules (module TEXT NOT NULL, env_id INTEGER NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
                          distribution_key TEXT NOT NULL, PRIMARY KEY (module, env_id));
    INSERT OR IGNORE INTO modules (module, env_id, distribution_key)
        SELECT j.value, v.env_id, canon_name(e.distribution) FROM versions v JOIN environments e ON e.id = v.env_id, json_each(v.top_level) j;
    ALTER TABLE evals ADD COLUMN histogram TEXT NOT NULL DEFAULT '{"counts": [], "low": 0.0, "high": 1.0, "peak": 0}';
    CREATE TABLE downloads (env_id INTEGER NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
                            user_id INTEGER NOT NULL, day TEXT NOT NULL, PRIMARY KEY (env_id, user_id, day));
    CREATE INDEX sessions_expiry ON sessions (expires_at);
    CREATE TABLE retired_versions (env_id INTEGER NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
                                   version_key TEXT NOT NULL, PRIMARY KEY (env_id, version_key));
    CREATE VIRTUAL TABLE environments_fts USING fts5 (owner, name, description, tags, content='environments', content_rowid='id');
    INSERT INTO environments_fts (rowid, owner, name, description, tags) SELECT id, owner, name, coalesce(description, ''), tags FROM environments;
    CREATE TRIGGER environments_fts_insert AFTER INSERT ON environments BEGIN
        INSERT INTO environments_fts (rowid, owner, name, description, tags) VALUES (new.id, new.owner, new.name, coalesce(new.description, ''), new.tags);
    END;
    CREATE TRIGGER environments_fts_delete AFTER DELETE ON environments BEGIN
        INSERT INTO environments_fts (environments_fts, rowid, owner, name, description, tags) VALUES ('delete', old.id, old.owner, old.name, coalesce(old.description, ''), old.tags);
    END;
    CREATE TRIGGER environments_fts_update AFTER UPDATE OF description, tags ON environments BEGIN
        INSERT INTO environments_fts (environments_fts, rowid, owner, name, description, tags) VALUES ('delete', old.id, old.owner, old.name, coalesce(old.description, ''), old.tags);
        INSERT INTO environments_fts (rowid, owner, name, description, tags) VALUES (new.id, new.owner, new.name, coalesce(new.description, ''), new.tags);
    END;
    """,
    # v9: search that reads the index alone. Who may see an environment is a column of the
    # search index (``access``: "public" and the owner as a token), so a count of matches never
    # looks up rows; ``catalog_state.generation`` changes with every change to an environment
    # row (triggers), the key under which searches are cached across processes.
    """
    ALTER TABLE environments ADD COLUMN access TEXT GENERATED ALWAYS AS
        ((CASE WHEN visibility = 'public' THEN 'public ' ELSE '' END) || 'o' || lower(hex(owner))) VIRTUAL;
    DROP TRIGGER environments_fts_insert;
    DROP TRIGGER environments_fts_delete;
    DROP TRIGGER environments_fts_update;
    DROP TABLE environments_fts;
    CREATE VIRTUAL TABLE environments_fts USING fts5 (owner, name, description, tags, access, content='environments', content_rowid='id');
    INSERT INTO environments_fts (rowid, owner, name, description, tags, access) SELECT id, owner, name, coalesce(description, ''), tags, access FROM environments;
    CREATE TRIGGER environments_fts_insert AFTER INSERT ON environments BEGIN
        INSERT INTO environments_fts (rowid, owner, name, description, tags, access) VALUES (new.id, new.owner, new.name, coalesce(new.description, ''), new.tags, new.access);
    END;
    CREATE TRIGGER environments_fts_delete AFTER DELETE ON environments BEGIN
        INSERT INTO environments_fts (environments_fts, rowid, owner, name, description, tags, access) VALUES ('delete', old.id, old.owner, old.name, coalesce(old.description, ''), old.tags, old.access);
    END;
    CREATE TRIGGER environments_fts_update AFTER UPDATE OF owner, description, tags, visibility ON environments BEGIN
        INSERT INTO environments_fts (environments_fts, rowid, owner, name, description, tags, access) VALUES ('delete', old.id, old.owner, old.name, coalesce(old.description, ''), old.tags, old.access);
        INSERT INTO environments_fts (rowid, owner, name, description, tags, access) VALUES (new.id, new.owner, new.name, coalesce(new.description, ''), new.tags, new.access);
    END;
    CREATE TABLE catalog_state (id INTEGER PRIMARY KEY CHECK (id = 1), generation INTEGER NOT NULL);
    INSERT INTO catalog_state (id, generation) VALUES (1, 0);
    CREATE TRIGGER catalog_changed_insert AFTER INSERT ON environments BEGIN
        UPDATE catalog_state SET generation = generation + 1;
    END;
    CREATE TRIGGER catalog_changed_update AFTER UPDATE ON environments BEGIN
        UPDATE catalog_state SET generation = generation + 1;
    END;
    CREATE TRIGGER catalog_changed_delete AFTER DELETE ON environments BEGIN
        UPDATE catalog_state SET generation = generation + 1;
    END;
    """,
    # retired (owner, name, version) triples outlive their environment: deleting a whole
    # environment cascaded its retired numbers away, so owner/name@1.0.0 could be published
    # again with other bytes under the same filename and URL
    """
    CREATE TABLE retired_names (owner TEXT NOT NULL, name_key TEXT NOT NULL, version_key TEXT NOT NULL,
                                PRIMARY KEY (owner, name_key, version_key));
    INSERT OR IGNORE INTO retired_names (owner, name_key, version_key)
        SELECT e.owner, e.name_key, r.version_key FROM retired_versions r JOIN environments e ON e.id = r.env_id;
    """,
    # a staged push (Prime's official CLI: declare, PUT to an upload URL, finalize): nothing here
    # is visible; the last finalize publishes through the same service as a native push. An
    # upload URL's token is kept only as its sha256 (upload_hash), cleared once it is used.
    """
    CREATE TABLE staged_pushes (id TEXT PRIMARY KEY, user_id INTEGER NOT NULL, owner TEXT NOT NULL,
                                name TEXT NOT NULL, visibility TEXT, created_at TEXT NOT NULL,
                                expires_at TEXT NOT NULL, published TEXT);
    CREATE TABLE staged_files (id TEXT PRIMARY KEY, push_id TEXT NOT NULL REFERENCES staged_pushes(id) ON DELETE CASCADE,
                               kind TEXT NOT NULL, filename TEXT NOT NULL, sha256 TEXT NOT NULL, size INTEGER,
                               upload_hash TEXT UNIQUE, state TEXT NOT NULL, expires_at TEXT NOT NULL);
    CREATE INDEX staged_pushes_expiry ON staged_pushes (expires_at);
    """,
]


def _autoincrement(table: str, columns: str, constraints: str, after: str = "") -> str:
    """SQLite's ALTER procedure for one table: a new table with the same columns and
    constraints and ``AUTOINCREMENT``, the rows copied (ids kept), the old table dropped, the
    new one renamed, then ``after`` (what dropping the old table dropped: its explicit indexes
    and triggers; the indexes of UNIQUE constraints come back with the table)."""
    names = ", ".join(
        c.split()[0] for c in columns.split(",\n") if "GENERATED ALWAYS" not in c.upper()
    )
    return f"""
    CREATE TABLE {table}_v12 (id INTEGER PRIMARY KEY AUTOINCREMENT, {columns}{constraints});
    INSERT INTO {table}_v12 (id, {names}) SELECT id, {names} FROM {table};
    DROP TABLE {table};
    ALTER TABLE {table}_v12 RENAME TO {table};
    {after}
    DELETE FROM sqlite_sequence WHERE name IN ('{table}', '{table}_v12');
    INSERT INTO sqlite_sequence (name, seq) SELECT '{table}', coalesce(max(id), 0) FROM {table};
    """


# v12: no id is ever given out twice. SQLite's ``INTEGER PRIMARY KEY`` hands out max(id) + 1, so
# the id of the newest row came back after it was deleted (a new environment got the deleted
# one's id, and the index pages cached under it); AUTOINCREMENT never reuses one. Every table
# with a surrogate id is rebuilt with it, its rows and ids kept. Ids deleted before this
# migration cannot be known: each table's sequence starts at its largest id still present, so an
# id above it that was deleted before the upgrade may be given out once more, never after.
SQLITE.append(
    _autoincrement(
        "users",
        "name TEXT UNIQUE NOT NULL,\nis_admin INTEGER NOT NULL DEFAULT 0,\ncreated_at TEXT NOT NULL",
        "",
    )
    + _autoincrement("teams", "name TEXT UNIQUE NOT NULL,\ncreated_at TEXT NOT NULL", "")
    + _autoincrement(
        "tokens",
        "user_id INTEGER NOT NULL REFERENCES users(id),\nname TEXT NOT NULL,\n"
        "token_hash TEXT UNIQUE NOT NULL,\nscopes TEXT NOT NULL,\ncreated_at TEXT NOT NULL,\n"
        "expires_at TEXT,\nrevoked_at TEXT",
        "",
    )
    + _autoincrement(
        "environments",
        "owner TEXT NOT NULL,\nname TEXT NOT NULL,\ndistribution TEXT NOT NULL,\n"
        "visibility TEXT NOT NULL,\ndescription TEXT,\ntags TEXT NOT NULL DEFAULT '[]',\n"
        "readme TEXT,\ncreated_at TEXT NOT NULL,\nupdated_at TEXT NOT NULL,\n"
        "downloads INTEGER NOT NULL DEFAULT 0,\nname_key TEXT,\nlatest_version TEXT,\n"
        "serial INTEGER NOT NULL DEFAULT 0,\naccess TEXT GENERATED ALWAYS AS "
        "((CASE WHEN visibility = 'public' THEN 'public ' ELSE '' END) || 'o' || lower(hex(owner))) VIRTUAL",
        ", UNIQUE (owner, name)",
        """
    CREATE UNIQUE INDEX environments_name_key ON environments (owner, name_key);
    CREATE INDEX environments_updated ON environments (updated_at);
    CREATE INDEX environments_created ON environments (created_at);
    CREATE INDEX environments_downloads ON environments (downloads);
    CREATE INDEX environments_owner ON environments (owner, name);
    CREATE TRIGGER environments_fts_insert AFTER INSERT ON environments BEGIN
        INSERT INTO environments_fts (rowid, owner, name, description, tags, access) VALUES (new.id, new.owner, new.name, coalesce(new.description, ''), new.tags, new.access);
    END;
    CREATE TRIGGER environments_fts_delete AFTER DELETE ON environments BEGIN
        INSERT INTO environments_fts (environments_fts, rowid, owner, name, description, tags, access) VALUES ('delete', old.id, old.owner, old.name, coalesce(old.description, ''), old.tags, old.access);
    END;
    CREATE TRIGGER environments_fts_update AFTER UPDATE OF owner, description, tags, visibility ON environments BEGIN
        INSERT INTO environments_fts (environments_fts, rowid, owner, name, description, tags, access) VALUES ('delete', old.id, old.owner, old.name, coalesce(old.description, ''), old.tags, old.access);
        INSERT INTO environments_fts (rowid, owner, name, description, tags, access) VALUES (new.id, new.owner, new.name, coalesce(new.description, ''), new.tags, new.access);
    END;
    CREATE TRIGGER catalog_changed_insert AFTER INSERT ON environments BEGIN
        UPDATE catalog_state SET generation = generation + 1;
    END;
    CREATE TRIGGER catalog_changed_update AFTER UPDATE ON environments BEGIN
        UPDATE catalog_state SET generation = generation + 1;
    END;
    CREATE TRIGGER catalog_changed_delete AFTER DELETE ON environments BEGIN
        UPDATE catalog_state SET generation = generation + 1;
    END;
    INSERT INTO environments_fts (environments_fts) VALUES ('rebuild');
    """,
    )
    + _autoincrement(
        "versions",
        "env_id INTEGER NOT NULL REFERENCES environments(id) ON DELETE CASCADE,\n"
        "version TEXT NOT NULL,\ncreated_at TEXT NOT NULL,\nyanked INTEGER NOT NULL DEFAULT 0,\n"
        "yanked_reason TEXT,\ncontent_hash TEXT NOT NULL,\nrequires_python TEXT,\n"
        "dependencies TEXT NOT NULL,\nsummary TEXT,\ntop_level TEXT NOT NULL DEFAULT '[]',\n"
        "version_key TEXT",
        ", UNIQUE (env_id, version)",
        "CREATE UNIQUE INDEX versions_key ON versions (env_id, version_key);",
    )
    + _autoincrement(
        "files",
        "version_id INTEGER NOT NULL REFERENCES versions(id) ON DELETE CASCADE,\n"
        "filename TEXT NOT NULL,\nkind TEXT NOT NULL,\nsha256 TEXT NOT NULL,\nsize INTEGER NOT NULL,\n"
        "blob TEXT NOT NULL,\nmetadata_blob TEXT,\nmetadata_sha256 TEXT,\nupload_time TEXT NOT NULL,\n"
        "env_id INTEGER REFERENCES environments(id) ON DELETE CASCADE",
        "",
        "CREATE UNIQUE INDEX files_unique ON files (version_id, filename);\n"
        "    CREATE UNIQUE INDEX files_env_filename ON files (env_id, filename);",
    )
    + _autoincrement(
        "evals",
        "version_id INTEGER NOT NULL REFERENCES versions(id) ON DELETE CASCADE,\n"
        "uploaded_by TEXT NOT NULL,\ncreated_at TEXT NOT NULL,\nmodel TEXT,\nsummary TEXT NOT NULL,\n"
        "num_rollouts INTEGER NOT NULL,\nmetadata_blob TEXT NOT NULL,\nresults_blob TEXT NOT NULL,\n"
        "run_id TEXT,\nhistogram TEXT NOT NULL DEFAULT "
        '\'{"counts": [], "low": 0.0, "high": 1.0, "peak": 0}\'',
        "",
        "CREATE UNIQUE INDEX evals_run ON evals (version_id, run_id);",
    )
    + _autoincrement(
        "datasets",
        "version_id INTEGER NOT NULL REFERENCES versions(id) ON DELETE CASCADE,\n"
        "uploaded_by TEXT NOT NULL,\ncreated_at TEXT NOT NULL,\nrows INTEGER NOT NULL,\n"
        "filter TEXT NOT NULL,\nmodels TEXT NOT NULL,\ncard_blob TEXT NOT NULL,\n"
        "data_blob TEXT NOT NULL,\ndata_sha256 TEXT NOT NULL",
        ", UNIQUE (version_id, data_sha256)",
    )
)
# v13: an eval pushed by Prime's official CLI (``prime eval push``), staged until its finalize:
# its checked metadata and its sample batches (bytes in the staging area); nothing here is
# visible. A finalized one keeps its row as the alias (the ``evaluation_id`` the client printed)
# of the eval it became, and goes with that eval.
SQLITE.append(
    """
    CREATE TABLE staged_evals (id TEXT PRIMARY KEY, user_id INTEGER NOT NULL, env_id INTEGER NOT NULL,
                               version_id INTEGER NOT NULL, metadata TEXT NOT NULL, created_at TEXT NOT NULL,
                               expires_at TEXT NOT NULL, eval_id INTEGER UNIQUE REFERENCES evals(id) ON DELETE CASCADE);
    CREATE TABLE staged_eval_batches (id TEXT PRIMARY KEY,
                                      staged_eval TEXT NOT NULL REFERENCES staged_evals(id) ON DELETE CASCADE,
                                      seq INTEGER NOT NULL, size INTEGER NOT NULL, stored INTEGER NOT NULL DEFAULT 0);
    CREATE INDEX staged_evals_expiry ON staged_evals (expires_at);
    CREATE INDEX staged_eval_batches_eval ON staged_eval_batches (staged_eval);
    """
)
# v14: `prime login`'s device flow (Prime's official CLI): a challenge a signed-in user approves
# in the browser, then fetched once by the CLI that asked. Its code and status token are kept
# only as sha256 hashes; nothing here is a token until the approved challenge is fetched.
SQLITE.append(
    """
    CREATE TABLE login_challenges (code_hash TEXT PRIMARY KEY, status_hash TEXT NOT NULL,
                                   public_key TEXT NOT NULL, client TEXT NOT NULL,
                                   created_at TEXT NOT NULL, expires_at TEXT NOT NULL,
                                   state TEXT NOT NULL, approver_token_id INTEGER REFERENCES tokens(id) ON DELETE CASCADE,
                                   scopes TEXT, token_expires TEXT);
    CREATE INDEX login_challenges_expiry ON login_challenges (expires_at);
    CREATE INDEX login_challenges_client ON login_challenges (client);
    """
)
# v15: leases and claims on blobs (``hub_server.db.blob_leases``): a push leases each blob
# before it writes it, the collector claims one (no live lease, no row referring to it) before
# it deletes it, so the two never interleave; the blob columns are indexed for that check.
SQLITE.append(
    """
    CREATE TABLE blob_leases (key TEXT NOT NULL, holder TEXT NOT NULL, taken_at REAL NOT NULL,
                              PRIMARY KEY (key, holder));
    CREATE TABLE blob_claims (key TEXT PRIMARY KEY, holder TEXT NOT NULL, claimed_at REAL NOT NULL);
    CREATE INDEX files_blob ON files (blob);
    CREATE INDEX files_metadata_blob ON files (metadata_blob);
    CREATE INDEX evals_metadata_blob ON evals (metadata_blob);
    CREATE INDEX evals_results_blob ON evals (results_blob);
    CREATE INDEX datasets_card_blob ON datasets (card_blob);
    CREATE INDEX datasets_data_blob ON datasets (data_blob);
    """
)
# v16: a small staged file's bytes in its row (``hub_server.services.staging.INLINE_MAX``),
# written with its state change: three requests fewer a file on S3 (its PUT, GET and DELETE)
SQLITE.append("ALTER TABLE staged_files ADD COLUMN data BLOB;")
# Tables whose ids are surrogates, never reused (AUTOINCREMENT here, sequences on PostgreSQL);
# ``staged_pushes``, ``staged_files``, ``staged_evals`` and ``staged_eval_batches`` are keyed by
# random tokens, ``sessions`` and ``login_challenges`` by a secret's hash, ``catalog_state`` is
# one row.
SURROGATE_IDS = (
    "users",
    "teams",
    "tokens",
    "environments",
    "versions",
    "files",
    "evals",
    "datasets",
)

# ASCII punctuation becomes a space before PostgreSQL's parser reads the text (translate: the
# same in every locale, unlike a regex class), so its words are runs of letters and digits. The
# characters are written as escapes: a "?" in a statement is a parameter to the engine.
_PUNCTUATION = "".join(c for c in map(chr, range(33, 127)) if not c.isalnum())
_ESCAPED = "".join(rf"\x{ord(c):02x}" for c in _PUNCTUATION)
PG_SEARCH_VECTOR = (
    "to_tsvector('simple', translate(owner || ' ' || name || ' ' || coalesce(description, '')"
    f" || ' ' || tags, E'{_ESCAPED}', '{' ' * len(_PUNCTUATION)}'))"
)

POSTGRESQL = [
    """
    CREATE TABLE users (id BIGSERIAL PRIMARY KEY, name TEXT UNIQUE NOT NULL, is_admin INTEGER NOT NULL DEFAULT 0,
                        created_at TEXT NOT NULL);
    CREATE TABLE teams (id BIGSERIAL PRIMARY KEY, name TEXT UNIQUE NOT NULL, created_at TEXT NOT NULL);
    CREATE TABLE team_members (team_id BIGINT NOT NULL REFERENCES teams(id) ON DELETE CASCADE,
                               user_id BIGINT NOT NULL REFERENCES users(id), role TEXT NOT NULL,
                               PRIMARY KEY (team_id, user_id));
    CREATE TABLE tokens (id BIGSERIAL PRIMARY KEY, user_id BIGINT NOT NULL REFERENCES users(id), name TEXT NOT NULL,
                         token_hash TEXT UNIQUE NOT NULL, scopes TEXT NOT NULL, created_at TEXT NOT NULL,
                         expires_at TEXT, revoked_at TEXT);
    CREATE TABLE environments (id BIGSERIAL PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL, name_key TEXT NOT NULL,
                               distribution TEXT NOT NULL, visibility TEXT NOT NULL, description TEXT,
                               tags TEXT NOT NULL DEFAULT '[]', readme TEXT, created_at TEXT NOT NULL,
                               updated_at TEXT NOT NULL, downloads BIGINT NOT NULL DEFAULT 0, latest_version TEXT,
                               serial BIGINT NOT NULL DEFAULT 0,
                               search tsvector GENERATED ALWAYS AS (to_tsvector('simple',
                                   owner || ' ' || name || ' ' || coalesce(description, '') || ' ' || tags)) STORED,
                               UNIQUE (owner, name), UNIQUE (owner, name_key));
    CREATE INDEX environments_search ON environments USING GIN (search);
    CREATE INDEX environments_updated ON environments (updated_at);
    CREATE INDEX environments_created ON environments (created_at);
    CREATE INDEX environments_downloads ON environments (downloads);
    CREATE TABLE environment_tags (env_id BIGINT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
                                   tag TEXT NOT NULL, PRIMARY KEY (env_id, tag));
    CREATE INDEX environment_tags_tag ON environment_tags (tag, env_id);
    CREATE TABLE versions (id BIGSERIAL PRIMARY KEY, env_id BIGINT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
                           version TEXT NOT NULL, version_key TEXT NOT NULL, created_at TEXT NOT NULL,
                           yanked INTEGER NOT NULL DEFAULT 0, yanked_reason TEXT, content_hash TEXT NOT NULL,
                           requires_python TEXT, dependencies TEXT NOT NULL, summary TEXT,
                           top_level TEXT NOT NULL DEFAULT '[]', UNIQUE (env_id, version), UNIQUE (env_id, version_key));
    CREATE TABLE files (id BIGSERIAL PRIMARY KEY, version_id BIGINT NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
                        env_id BIGINT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
                        filename TEXT NOT NULL, kind TEXT NOT NULL, sha256 TEXT NOT NULL, size BIGINT NOT NULL,
                        blob TEXT NOT NULL, metadata_blob TEXT, metadata_sha256 TEXT, upload_time TEXT NOT NULL,
                        UNIQUE (version_id, filename), UNIQUE (env_id, filename));
    CREATE TABLE modules (module TEXT NOT NULL, env_id BIGINT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
                          distribution_key TEXT NOT NULL, PRIMARY KEY (module, env_id));
    CREATE TABLE evals (id BIGSERIAL PRIMARY KEY, version_id BIGINT NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
                        uploaded_by TEXT NOT NULL, created_at TEXT NOT NULL, model TEXT, summary TEXT NOT NULL,
                        num_rollouts INTEGER NOT NULL, metadata_blob TEXT NOT NULL, results_blob TEXT NOT NULL,
                        run_id TEXT, histogram TEXT NOT NULL, UNIQUE (version_id, run_id));
    CREATE TABLE datasets (id BIGSERIAL PRIMARY KEY, version_id BIGINT NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
                           uploaded_by TEXT NOT NULL, created_at TEXT NOT NULL, rows BIGINT NOT NULL,
                           filter TEXT NOT NULL, models TEXT NOT NULL, card_blob TEXT NOT NULL, data_blob TEXT NOT NULL,
                           data_sha256 TEXT NOT NULL, UNIQUE (version_id, data_sha256));
    CREATE TABLE sessions (session_hash TEXT PRIMARY KEY, token_id BIGINT NOT NULL REFERENCES tokens(id) ON DELETE CASCADE,
                           created_at TEXT NOT NULL, expires_at TEXT NOT NULL);
    CREATE INDEX sessions_expiry ON sessions (expires_at);
    CREATE TABLE downloads (env_id BIGINT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
                            user_id BIGINT NOT NULL, day TEXT NOT NULL, PRIMARY KEY (env_id, user_id, day));
    CREATE TABLE retired_versions (env_id BIGINT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
                                   version_key TEXT NOT NULL, PRIMARY KEY (env_id, version_key));
    """,
    # v2: the generation searches are cached under (see SQLite's v9); one bump per statement
    """
    CREATE TABLE catalog_state (id INTEGER PRIMARY KEY CHECK (id = 1), generation BIGINT NOT NULL);
    INSERT INTO catalog_state (id, generation) VALUES (1, 0);
    CREATE FUNCTION catalog_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE catalog_state SET generation = generation + 1;
        RETURN NULL;
    END $$;
    CREATE TRIGGER catalog_changed AFTER INSERT OR UPDATE OR DELETE ON environments
        FOR EACH STATEMENT EXECUTE FUNCTION catalog_changed();
    """,
    # v3: retired (owner, name, version) triples outlive their environment (see SQLite's)
    """
    CREATE TABLE retired_names (owner TEXT NOT NULL, name_key TEXT NOT NULL, version_key TEXT NOT NULL,
                                PRIMARY KEY (owner, name_key, version_key));
    INSERT INTO retired_names (owner, name_key, version_key)
        SELECT e.owner, e.name_key, r.version_key FROM retired_versions r JOIN environments e ON e.id = r.env_id
        ON CONFLICT DO NOTHING;
    """,
    # v4: a staged push (Prime's official CLI: declare, PUT to an upload URL, finalize): nothing here
    # is visible; the last finalize publishes through the same service as a native push. An
    # upload URL's token is kept only as its sha256 (upload_hash), cleared once it is used.
    """
    CREATE TABLE staged_pushes (id TEXT PRIMARY KEY, user_id BIGINT NOT NULL, owner TEXT NOT NULL,
                                name TEXT NOT NULL, visibility TEXT, created_at TEXT NOT NULL,
                                expires_at TEXT NOT NULL, published TEXT);
    CREATE TABLE staged_files (id TEXT PRIMARY KEY, push_id TEXT NOT NULL REFERENCES staged_pushes(id) ON DELETE CASCADE,
                               kind TEXT NOT NULL, filename TEXT NOT NULL, sha256 TEXT NOT NULL, size BIGINT,
                               upload_hash TEXT UNIQUE, state TEXT NOT NULL, expires_at TEXT NOT NULL);
    CREATE INDEX staged_pushes_expiry ON staged_pushes (expires_at);
    """,
    # v5: an eval pushed by Prime's official CLI, staged until its finalize (see SQLite's v13)
    """
    CREATE TABLE staged_evals (id TEXT PRIMARY KEY, user_id BIGINT NOT NULL, env_id BIGINT NOT NULL,
                               version_id BIGINT NOT NULL, metadata TEXT NOT NULL, created_at TEXT NOT NULL,
                               expires_at TEXT NOT NULL, eval_id BIGINT UNIQUE REFERENCES evals(id) ON DELETE CASCADE);
    CREATE TABLE staged_eval_batches (id TEXT PRIMARY KEY,
                                      staged_eval TEXT NOT NULL REFERENCES staged_evals(id) ON DELETE CASCADE,
                                      seq INTEGER NOT NULL, size BIGINT NOT NULL, stored INTEGER NOT NULL DEFAULT 0);
    CREATE INDEX staged_evals_expiry ON staged_evals (expires_at);
    CREATE INDEX staged_eval_batches_eval ON staged_eval_batches (staged_eval);
    """,
    # v6: `prime login`'s device flow (see SQLite's v14)
    """
    CREATE TABLE login_challenges (code_hash TEXT PRIMARY KEY, status_hash TEXT NOT NULL,
                                   public_key TEXT NOT NULL, client TEXT NOT NULL,
                                   created_at TEXT NOT NULL, expires_at TEXT NOT NULL,
                                   state TEXT NOT NULL, approver_token_id BIGINT REFERENCES tokens(id) ON DELETE CASCADE,
                                   scopes TEXT, token_expires TEXT);
    CREATE INDEX login_challenges_expiry ON login_challenges (expires_at);
    CREATE INDEX login_challenges_client ON login_challenges (client);
    """,
    # v7: leases and claims on blobs (see SQLite's v15)
    """
    CREATE TABLE blob_leases (key TEXT NOT NULL, holder TEXT NOT NULL, taken_at DOUBLE PRECISION NOT NULL,
                              PRIMARY KEY (key, holder));
    CREATE TABLE blob_claims (key TEXT PRIMARY KEY, holder TEXT NOT NULL, claimed_at DOUBLE PRECISION NOT NULL);
    CREATE INDEX files_blob ON files (blob);
    CREATE INDEX files_metadata_blob ON files (metadata_blob);
    CREATE INDEX evals_metadata_blob ON evals (metadata_blob);
    CREATE INDEX evals_results_blob ON evals (results_blob);
    CREATE INDEX datasets_card_blob ON datasets (card_blob);
    CREATE INDEX datasets_data_blob ON datasets (data_blob);
    """,
    # v8: evals move the generation too: environment pages (which show them) are cached under it
    """
    CREATE TRIGGER evals_changed AFTER INSERT OR UPDATE OR DELETE ON evals
        FOR EACH STATEMENT EXECUTE FUNCTION catalog_changed();
    """,
    # v9: a small staged file's bytes in its row (see SQLite's v16)
    "ALTER TABLE staged_files ADD COLUMN data BYTEA;",
    # v10: the search column indexes runs of letters and digits, as SQLite's FTS5 does: the
    # parser read "env-99" as "env" and the signed number "-99", "v1.2" as a version, an
    # address or a path as one token, so a search for a name's words missed it here only
    f"""
    DROP INDEX environments_search;
    ALTER TABLE environments DROP COLUMN search;
    ALTER TABLE environments ADD COLUMN search tsvector GENERATED ALWAYS AS ({PG_SEARCH_VECTOR}) STORED;
    CREATE INDEX environments_search ON environments USING GIN (search);
    """,
]


def statements(script: str) -> list[str]:
    """A script's statements; a trigger's body (BEGIN ... END;) stays one statement."""
    out, current = [], []
    for part in script.split(";"):
        current.append(part)
        text = ";".join(current)
        if text.strip() and text.upper().count("BEGIN") <= text.upper().count("END"):
            out.append(text.strip())
            current = []
    return out


def migrate(database: Any) -> None:
    if database.dialect == "sqlite":
        with database.read() as db:
            if db.execute("PRAGMA user_version").fetchone()[0] >= len(SQLITE):
                return
        with database.schema_change() as db:  # (re-read: another process may have migrated)
            current = db.execute("PRAGMA user_version").fetchone()[0]
            for number, script in enumerate(SQLITE[current:], start=current + 1):
                for statement in statements(script):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {number}")
        return
    with database.transaction() as db:
        db.execute("SELECT pg_advisory_xact_lock(7242001)")
        db.execute("CREATE TABLE IF NOT EXISTS hub_schema (version INTEGER NOT NULL)")
        row = db.execute("SELECT max(version) AS v FROM hub_schema").fetchone()
        current = row["v"] or 0
        for number, script in enumerate(POSTGRESQL[current:], start=current + 1):
            db.execute(script)
            db.execute("INSERT INTO hub_schema (version) VALUES (?)", (number,))
