"""Identities are never reused (issue 40): after a delete, no id of the deleted row is given to a
new one (AUTOINCREMENT on SQLite, sequences on PostgreSQL), and nothing the hub keeps or serves
(the simple index's cached pages, search answers, API reads, pages, files, evals, datasets,
tokens) shows the deleted thing to readers of what replaced it. On both storage backends; the
migration that made SQLite's ids so is tested on a database of the previous schema."""

from __future__ import annotations

import hashlib
import io
import json
import re
import sqlite3
from pathlib import Path

import httpx
import pytest
from support.hubs import eval_files, publish, serving, user, wheel

from hub_server.db import schema
from hub_server.db.blob_references import BLOB_COLUMNS
from hub_server.db.engine import SQLiteDatabase
from hub_server.process import start_hub

PEP691 = "application/vnd.pypi.simple.v1+json"
HUB_SERVER = Path(__file__).resolve().parents[2] / "hub_server"


@pytest.fixture(scope="module")
def hub(tmp_path_factory, hub_backend):
    with serving(tmp_path_factory, hub_backend) as running:
        yield running


def query(hub, sql: str, params: tuple = ()) -> list[dict]:
    return hub["backend"].query(hub["data"], sql, params)


def auth(token: str | None) -> dict:
    return {"Authorization": f"Bearer {token}"} if token else {}


def index(hub, owner: str, name: str, token: str | None = None) -> dict[str, httpx.Response]:
    """The project page of ``owner/name`` as installers read it, PEP 691 JSON and PEP 503 HTML."""
    url = f"{hub['url']}/simple/{owner}/{name}/{name}/"
    basic = ("__token__", token) if token else None
    return {
        "json": httpx.get(url, headers={"Accept": PEP691}, auth=basic),
        "html": httpx.get(url, auth=basic),
    }


def everything(hub, owner: str, name: str, token: str | None, words: str) -> str:
    """Every read that shows ``owner/name`` (both index pages twice, so the second comes from
    the cache; the API's environment, versions and each version; the web page; a search for
    ``words``), concatenated; each must answer 200 or 404."""
    api = f"{hub['url']}/api/v1/environments"
    answers = [*index(hub, owner, name, token).values(), *index(hub, owner, name, token).values()]
    answers += [
        httpx.get(f"{api}/{owner}/{name}", headers=auth(token)),
        httpx.get(f"{api}/{owner}/{name}/versions", headers=auth(token)),
        httpx.get(f"{hub['url']}/e/{owner}/{name}"),
        httpx.get(api, params={"q": words}, headers=auth(token)),
        httpx.get(api, params={"owner": owner}, headers=auth(token)),
    ]
    for listed in answers[5].json() if answers[5].status_code == 200 else []:
        answers.append(
            httpx.get(f"{api}/{owner}/{name}/versions/{listed['version']}", headers=auth(token))
        )
        for kind in ("evals", "datasets"):
            answers.append(
                httpx.get(
                    f"{api}/{owner}/{name}/versions/{listed['version']}/{kind}",
                    headers=auth(token),
                )
            )
    assert all(a.status_code in (200, 404) for a in answers), [
        (str(a.url), a.status_code) for a in answers
    ]
    return "\n".join(a.text for a in answers)


def parquet(rows: int) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(rows)]}), buf)
    return buf.getvalue()


def attach(hub, token, owner, name, version: str, run_id: str, rows: int) -> tuple[dict, dict]:
    """An eval run and a dataset attached to ``owner/name@version``: their API answers."""
    base = f"{hub['url']}/api/v1/environments/{owner}/{name}/versions/{version}"
    info = httpx.get(base, headers=auth(token)).json()
    evaluated = httpx.post(
        f"{base}/evals", files=eval_files(info, run_id, [1.0, 0.0]), headers=auth(token), timeout=60
    )
    assert evaluated.status_code == 201, evaluated.text
    card = {
        "rows": rows,
        "filter": {"kind": "all"},
        "description": f"dataset of {run_id}",
        "sources": [
            {
                "env_id": info["name"],
                "env_version": info["version"],
                "env_content_hash": info["content_hash"],
                "run_id": run_id,
                "model": "m",
            }
        ],
    }
    files = {
        "card": ("vf_data.json", json.dumps(card).encode()),
        "data": ("data.parquet", parquet(rows)),
    }
    stored = httpx.post(f"{base}/datasets", files=files, headers=auth(token), timeout=60)
    assert stored.status_code == 201, stored.text
    return evaluated.json(), stored.json()


def ids_of(hub, owner: str, name: str) -> dict[str, set[int]]:
    """Every id an environment's rows hold: its own, its versions', files', evals', datasets'."""
    rows = query(
        hub,
        "SELECT e.id AS env, v.id AS version, f.id AS file, ev.id AS eval, d.id AS dataset "
        "FROM environments e LEFT JOIN versions v ON v.env_id = e.id "
        "LEFT JOIN files f ON f.version_id = v.id LEFT JOIN evals ev ON ev.version_id = v.id "
        "LEFT JOIN datasets d ON d.version_id = v.id WHERE e.owner = ? AND e.name = ?",
        (owner, name),
    )
    return {
        kind: {r[kind] for r in rows if r[kind] is not None}
        for kind in ("env", "version", "file", "eval", "dataset")
    }


def newest_ids(hub) -> dict[str, int]:
    tables = ("environments", "versions", "files", "evals", "datasets", "tokens")
    sql = " UNION ALL ".join(f"SELECT '{t}' AS t, max(id) AS m FROM {t}" for t in tables)
    return {r["t"]: r["m"] or 0 for r in query(hub, sql)}


# --- the defect as found -------------------------------------------------------------------------------


def test_a_deleted_environments_index_is_never_served_for_the_next_environment(hub):
    """The repro: push ``repro-y`` (private), read its index (cached), delete it, push
    ``repro-z``: on SQLite ``repro-z`` got ``repro-y``'s id and its index page was served from the
    cache, listing ``repro-y``'s wheel (``prime env install`` refused: "the index listed a wheel
    for `repro-y`"), its file name and sha256 shown to anyone reading ``repro-z``. Also through a
    second hub process on the same store, which cached ``repro-y``'s page and never saw the
    delete: only an id no other environment gets keeps it from serving that page."""
    owner, token = user(hub, "alice")
    y_wheel = wheel("repro-y", "0.1.0")
    with start_hub(hub["data"], backend=hub["backend"].flags) as server:
        second = {**hub, "url": server.url}
        published = publish(hub, token, owner, "repro-y", y_wheel, visibility="private")
        assert published.status_code == 201, published.text
        for process in (hub, second):
            for page in index(process, owner, "repro-y", token).values():
                assert page.status_code == 200 and "repro_y-0.1.0" in page.text
        y_ids = ids_of(hub, owner, "repro-y")
        assert y_ids["env"] == {newest_ids(hub)["environments"]}  # the newest: its id came back
        url = f"{hub['url']}/api/v1/environments/{owner}/repro-y"
        assert httpx.delete(url, headers=auth(token)).status_code == 204
        assert publish(hub, token, owner, "repro-z", wheel("repro-z", "0.1.0")).status_code == 201
        y_sha = hashlib.sha256(y_wheel[1]).hexdigest()
        for process in (hub, second):
            for token_or_none in (None, token):
                pages = index(process, owner, "repro-z", token_or_none)
                files = pages["json"].json()["files"]
                assert [f["filename"] for f in files] == ["repro_z-0.1.0-py3-none-any.whl"]
                for page in pages.values():
                    assert page.status_code == 200
                    assert "repro_y" not in page.text and y_sha not in page.text
            assert index(process, owner, "repro-y", token)["json"].status_code == 404
    z_ids = ids_of(hub, owner, "repro-z")
    assert not z_ids["env"] & y_ids["env"] and not z_ids["file"] & y_ids["file"]


# --- each kind: create, read everywhere, delete, recreate under the same name ----------------------------


def test_an_environment_deleted_and_made_again_under_its_name_shows_nothing_of_the_old_one(hub):
    owner, token = user(hub, "envs")
    _, reader_token = user(hub, "reader")
    first = wheel("same-env", "1.0.0", extra=[("same_env/old.py", "OLD = 1\n")])
    made = publish(
        hub, token, owner, "same-env", first, visibility="private",
        description="quokka marsupial secret",
    )  # fmt: skip
    assert made.status_code == 201, made.text
    old_eval, old_dataset = attach(hub, token, owner, "same-env", "1.0.0", "old-run", 3)
    seen = everything(hub, owner, "same-env", token, "quokka")
    assert "quokka" in seen and "same_env-1.0.0" in seen and "old-run" in seen
    old_file = f"{hub['url']}/files/{owner}/same-env/same_env-1.0.0-py3-none-any.whl"
    basic = ("__token__", token)
    assert httpx.get(old_file, auth=basic).content == first[1]
    assert httpx.get(old_dataset["url"], headers=auth(token)).status_code == 200
    assert httpx.get(old_file, auth=("__token__", reader_token)).status_code == 404
    # the owner's download is counted, not yet written when the environment goes (the hub
    # writes counts every 10 s and before a listing)
    old = ids_of(hub, owner, "same-env")
    gone = httpx.delete(f"{hub['url']}/api/v1/environments/{owner}/same-env", headers=auth(token))
    assert gone.status_code == 204
    # a listing flushes the downloads pending in the hub: the deleted environment's is dropped,
    # not a failed flush (its row is gone) nor a count for whatever comes next
    assert httpx.get(f"{hub['url']}/api/v1/environments").status_code == 200
    after = everything(hub, owner, "same-env", token, "quokka")
    assert "quokka" not in after and "same_env-1.0.0" not in after and "old-run" not in after

    second = wheel("same-env", "2.0.0")
    remade = publish(hub, token, owner, "same-env", second, description="wombat burrow")
    assert remade.status_code == 201, remade.text
    new_eval, new_dataset = attach(hub, token, owner, "same-env", "2.0.0", "old-run", 2)
    new = ids_of(hub, owner, "same-env")
    for kind, ids in old.items():
        assert ids and new[kind] and not ids & new[kind], (kind, ids, new[kind])
    assert new_eval["id"] != old_eval["id"] and new_dataset["id"] != old_dataset["id"]
    for who in (None, token, reader_token):
        shown = everything(hub, owner, "same-env", who, "wombat")
        assert "wombat" in shown and "same_env-2.0.0" in shown
        for old_thing in (
            "quokka",
            "same_env-1.0.0",
            "old.py",
            hashlib.sha256(first[1]).hexdigest(),
        ):
            assert old_thing not in shown, (who, old_thing)
        assert (
            "quokka"
            not in httpx.get(
                f"{hub['url']}/api/v1/environments", params={"q": "quokka"}, headers=auth(who)
            ).text
        )
        assert httpx.get(old_file, auth=("__token__", who) if who else None).status_code == 404
        assert httpx.get(old_dataset["url"], headers=auth(who)).status_code == 404
    assert query(
        hub,
        "SELECT d.downloads FROM environments d WHERE d.owner=? AND d.name=?",
        (owner, "same-env"),
    ) == [{"downloads": 0}]


def test_a_version_deleted_and_followed_by_another_shows_nothing_of_the_deleted_one(hub):
    owner, token = user(hub, "vers")
    for version in ("1.0.0", "1.1.0"):
        assert publish(hub, token, owner, "ver-env", wheel("ver-env", version)).status_code == 201
    old_eval, old_dataset = attach(hub, token, owner, "ver-env", "1.1.0", "run-one", 4)
    seen = everything(hub, owner, "ver-env", token, "ver")
    assert "ver_env-1.1.0" in seen and "run-one" in seen
    before = ids_of(hub, owner, "ver-env")
    newest = newest_ids(hub)
    assert newest["evals"] == old_eval["id"] and newest["datasets"] == old_dataset["id"]
    url = f"{hub['url']}/api/v1/environments/{owner}/ver-env/versions/1.1.0"
    assert httpx.delete(url, headers=auth(token)).status_code == 204
    kept = ids_of(hub, owner, "ver-env")
    dropped = {kind: before[kind] - kept[kind] for kind in before}
    assert dropped["version"] and dropped["file"] and dropped["eval"] and dropped["dataset"]
    assert httpx.get(url).status_code == 404
    assert httpx.get(old_dataset["url"]).status_code == 404
    assert publish(hub, token, owner, "ver-env", wheel("ver-env", "1.2.0")).status_code == 201
    new_eval, new_dataset = attach(hub, token, owner, "ver-env", "1.2.0", "run-one", 4)
    now = ids_of(hub, owner, "ver-env")
    for kind in ("version", "file", "eval", "dataset"):
        assert not dropped[kind] & now[kind], kind
    assert (new_eval["id"], new_dataset["id"]) != (old_eval["id"], old_dataset["id"])
    assert new_eval["id"] > old_eval["id"] and new_dataset["id"] > old_dataset["id"]
    pages = index(hub, owner, "ver-env")
    listed = [f["filename"] for f in pages["json"].json()["files"]]
    assert listed == ["ver_env-1.0.0-py3-none-any.whl", "ver_env-1.2.0-py3-none-any.whl"]
    assert "ver_env-1.1.0" not in pages["html"].text
    shown = everything(hub, owner, "ver-env", None, "ver")
    assert "ver_env-1.1.0" not in shown and "1.1.0" not in shown
    # the deleted version's dataset, by its old id under the version that followed: not there
    moved = old_dataset["url"].replace("/1.1.0/", "/1.2.0/")
    assert httpx.get(moved).status_code == 404


def test_a_revoked_token_stays_revoked_and_its_id_names_no_other_token(hub):
    """Tokens are revoked, not deleted: a revoked token never works again, one made after it
    under the same name has another id, and revoking the old id again leaves the new one be."""
    _, token = user(hub, "toks")
    tokens = f"{hub['url']}/api/v1/tokens"
    made = httpx.post(tokens, json={"name": "ci", "scopes": ["read"]}, headers=auth(token))
    assert made.status_code == 201, made.text
    old = made.json()
    assert httpx.get(f"{hub['url']}/api/v1/me", headers=auth(old["token"])).status_code == 200
    assert httpx.delete(f"{tokens}/{old['id']}", headers=auth(token)).status_code == 204
    again = httpx.post(tokens, json={"name": "ci", "scopes": ["read"]}, headers=auth(token)).json()
    assert again["id"] != old["id"] and again["id"] > old["id"]
    assert httpx.get(f"{hub['url']}/api/v1/me", headers=auth(old["token"])).status_code == 401
    assert httpx.delete(f"{tokens}/{old['id']}", headers=auth(token)).status_code == 204
    assert httpx.get(f"{hub['url']}/api/v1/me", headers=auth(again["token"])).status_code == 200
    listed = httpx.get(tokens, headers=auth(token)).json()
    assert sorted((t["id"], t["revoked"]) for t in listed if t["name"] == "ci") == [
        (old["id"], True),
        (again["id"], False),
    ]


# --- the schema: every surrogate id comes from a sequence that never goes back ------------------------


def test_every_surrogate_id_is_never_given_out_twice(hub):
    backend = hub["backend"]
    if backend.db is None:
        db = sqlite3.connect(hub["data"] / "hub.sqlite3")
        try:
            tables = {
                name: sql
                for name, sql in db.execute(
                    "SELECT name, sql FROM sqlite_master WHERE type='table'"
                )
            }
            with_id = {
                name
                for name in tables
                if not name.startswith(("sqlite_", "environments_fts"))
                and any(
                    col[1] == "id" and col[2].upper() == "INTEGER" and col[5]
                    for col in db.execute(f"PRAGMA table_info({name})")
                )
            }
        finally:
            db.close()
        assert with_id == {*schema.SURROGATE_IDS, "catalog_state"}  # (one row, id 1)
        for name in schema.SURROGATE_IDS:
            assert "AUTOINCREMENT" in tables[name].upper(), name
    else:
        rows = query(
            hub,
            "SELECT table_name, column_default FROM information_schema.columns "
            "WHERE table_schema = 'public' AND column_name = 'id' AND data_type = 'bigint'",
        )
        assert {r["table_name"] for r in rows} == set(schema.SURROGATE_IDS)
        for r in rows:
            assert (r["column_default"] or "").startswith("nextval("), r


def test_no_statement_chooses_the_id_of_a_surrogate_row():
    """Ids come from the database alone: no INSERT names the id column of a surrogate table
    (a chosen id could be one deleted before)."""
    offenders = []
    for path in HUB_SERVER.rglob("*.py"):
        for table in re.findall(r"INSERT INTO (\w+) \(\s*id\b", path.read_text()):
            if table in schema.SURROGATE_IDS:
                offenders.append((path.name, table))
    assert offenders == []


# --- the migration: a database of the previous schema upgrades in place ------------------------------------


def previous_schema(path: Path) -> SQLiteDatabase:
    """A hub database as the release before v12 made it (migrations 1-11)."""
    database = SQLiteDatabase(path)
    with database.transaction() as db:
        for number, script in enumerate(schema.SQLITE[:11], start=1):
            for statement in schema.statements(script):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {number}")
    return database


# v15's indexes, for the collector's check that no row refers to a blob
BLOB_INDEXES = {f"{t}_{c}" for t, columns in BLOB_COLUMNS.items() for c in columns}


def shape(db: sqlite3.Connection) -> dict:
    """Every table's columns, foreign keys and indexes, and every trigger: what v12 must keep."""
    out: dict = {}
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"):
        if name == "sqlite_sequence":
            continue
        indexes = {
            (
                "auto" if i[1].startswith("sqlite_autoindex") else i[1],
                i[2],
                i[3],
                *(c[2] for c in db.execute(f"PRAGMA index_info('{i[1]}')")),
            )
            for i in db.execute(f"PRAGMA index_list('{name}')")
        }
        out[name] = (
            [tuple(c) for c in db.execute(f"PRAGMA table_xinfo('{name}')")],
            sorted(tuple(f)[2:] for f in db.execute(f"PRAGMA foreign_key_list('{name}')")),
            sorted(indexes),
        )
    out["triggers"] = sorted(
        (r[0], r[1], re.sub(r"\s+", " ", r[2]))
        for r in db.execute("SELECT name, tbl_name, sql FROM sqlite_master WHERE type='trigger'")
    )
    return out


def test_a_database_of_the_previous_schema_upgrades_in_place_and_keeps_its_rows(
    tmp_path, hub_backend
):
    if hub_backend.db is not None:
        pytest.skip("the migration is SQLite's (PostgreSQL's ids always came from sequences)")
    data = tmp_path / "hub"
    data.mkdir(mode=0o700)
    path = data / "hub.sqlite3"
    old = previous_schema(path)
    stamp = "2025-01-01T00:00:00Z"
    with old.transaction() as db:
        for user_name in ("ann", "bob", "cy"):
            db.execute(
                "INSERT INTO users (name, is_admin, created_at) VALUES (?, 0, ?)",
                (user_name, stamp),
            )
        db.execute(
            "INSERT INTO tokens (user_id, name, token_hash, scopes, created_at) VALUES (1, 'initial', ?, 'publish,read', ?)",
            (hashlib.sha256(b"vfh_ann").hexdigest(), stamp),
        )
        db.execute("INSERT INTO teams (name, created_at) VALUES ('crew', ?)", (stamp,))
        db.execute("INSERT INTO team_members (team_id, user_id, role) VALUES (1, 1, 'owner')")
        for n, env in enumerate(("kept-env", "top-env"), start=1):
            db.execute(
                "INSERT INTO environments (owner, name, name_key, distribution, visibility, description, tags, "
                "created_at, updated_at, latest_version, serial) VALUES ('ann', ?, ?, ?, 'public', ?, '[\"t\"]', ?, ?, '1.0.0', 1)",
                (env, env, env, f"platypus {env}", stamp, stamp),
            )
            db.execute("INSERT INTO environment_tags (env_id, tag) VALUES (?, 't')", (n,))
            db.execute(
                "INSERT INTO versions (env_id, version, version_key, created_at, content_hash, dependencies) "
                "VALUES (?, '1.0.0', '1', ?, 'sha256:ab', '[]')",
                (n, stamp),
            )
            db.execute(
                "INSERT INTO files (version_id, env_id, filename, kind, sha256, size, blob, upload_time) "
                "VALUES (?, ?, ?, 'wheel', ?, 1, ?, ?)",
                (
                    n,
                    n,
                    f"{env.replace('-', '_')}-1.0.0-py3-none-any.whl",
                    "a" * 64,
                    "a" * 64,
                    stamp,
                ),
            )
            db.execute(
                "INSERT INTO evals (version_id, uploaded_by, created_at, summary, num_rollouts, metadata_blob, "
                "results_blob, run_id) VALUES (?, 'ann', ?, '{}', 1, ?, ?, ?)",
                (n, stamp, "a" * 64, "a" * 64, f"run{n}"),
            )
            db.execute(
                "INSERT INTO datasets (version_id, uploaded_by, created_at, rows, filter, models, card_blob, "
                "data_blob, data_sha256) VALUES (?, 'ann', ?, 1, 'all', '[]', ?, ?, ?)",
                (n, stamp, "a" * 64, "a" * 64, str(n)),
            )
            db.execute(
                "INSERT INTO downloads (env_id, user_id, day) VALUES (?, 2, '2025-01-01')", (n,)
            )
        db.execute("DELETE FROM environments WHERE name = 'top-env'")  # the newest: cascades
        db.execute("DELETE FROM users WHERE name = 'cy'")
    old.close()
    raw = sqlite3.connect(path)
    before_shape = shape(raw)
    tables = ["users", "teams", "team_members", "tokens", "environments", "environment_tags",
              "versions", "files", "evals", "datasets", "downloads"]  # fmt: skip
    before = {t: raw.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables}
    raw.close()
    assert len(before["environments"]) == 1 and len(before["files"]) == 1

    with start_hub(data) as server:  # migrates at start, in place
        found = httpx.get(f"{server.url}/api/v1/environments", params={"q": "platypus"}).json()
        assert [e["name"] for e in found["items"]] == ["kept-env"]
        page = httpx.get(f"{server.url}/simple/ann/kept-env/kept-env/", headers={"Accept": PEP691})
        assert [f["filename"] for f in page.json()["files"]] == ["kept_env-1.0.0-py3-none-any.whl"]

    raw = sqlite3.connect(path)
    try:
        assert raw.execute("PRAGMA user_version").fetchone()[0] == len(schema.SQLITE)
        assert {
            t: raw.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables
        } == before
        after_shape = shape(raw)  # v12 keeps the same columns, keys, indexes and triggers;
        # later migrations only add tables (v13: staged evals, v14: login challenges, v15: blob
        # leases and claims), v15's indexes on the blob columns and v16's column of staged bytes
        kept = {t: after_shape[t] for t in before_shape}
        for table, described in kept.items():
            if table != "triggers":
                columns, keys, indexes = described
                if table == "staged_files":
                    assert [c[1:3] for c in columns if c[1] == "data"] == [("data", "BLOB")]
                    columns = [c for c in columns if c[1] != "data"]
                kept[table] = (columns, keys, [i for i in indexes if i[0] not in BLOB_INDEXES])
        assert kept == before_shape
        assert set(after_shape) - set(before_shape) == {
            "staged_evals",
            "staged_eval_batches",
            "login_challenges",
            "blob_leases",
            "blob_claims",
        }
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
        raw.execute(
            "INSERT INTO environments_fts (environments_fts, rank) VALUES ('integrity-check', 1)"
        )
        # each sequence starts at the largest id left (what was deleted before cannot be known)
        assert dict(raw.execute("SELECT name, seq FROM sqlite_sequence").fetchall()) == {
            "users": 2, "teams": 1, "tokens": 1, "environments": 1, "versions": 1, "files": 1,
            "evals": 1, "datasets": 1,
        }  # fmt: skip
    finally:
        raw.close()
    upgraded = SQLiteDatabase(path)
    try:
        schema.migrate(upgraded)  # once only: a second start changes nothing
        with upgraded.transaction() as db:
            assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
            made = []
            for name in ("n1", "n2"):
                row = db.execute(
                    "INSERT INTO environments (owner, name, name_key, distribution, visibility, created_at, "
                    "updated_at) VALUES ('ann', ?, ?, ?, 'public', ?, ?) RETURNING id",
                    (name, name, name, stamp, stamp),
                ).fetchone()
                made.append(row["id"])
                db.execute("DELETE FROM environments WHERE id = ?", (row["id"],))  # the newest
            # 2 was deleted before the upgrade, above the largest id left: the one id that may
            # be given out again (the sequence starts at 1); 3 then follows, never 2 again
            assert made == [2, 3]
            # foreign keys and their cascades hold after the rebuild
            db.execute("DELETE FROM environments WHERE name = 'kept-env'")
            assert db.execute("SELECT count(*) FROM files").fetchone()[0] == 0
            assert db.execute("SELECT count(*) FROM datasets").fetchone()[0] == 0
            with pytest.raises(sqlite3.IntegrityError):
                db.execute(
                    "INSERT INTO versions (env_id, version, version_key, created_at, content_hash, "
                    "dependencies) VALUES (99, '1', '1', ?, 'h', '[]')",
                    (stamp,),
                )
    finally:
        upgraded.close()
