"""A bulk load (``hub_server.db.bulk_load``, how benchmarks/hub.py fills a hub to size) leaves
the rows that committing each version in turn leaves: environments (README, description,
visibility and tags as the last push left them, latest version, serial), tags, versions, files
and the search index, with the same ids, on each backend."""

from __future__ import annotations

from typing import Any

from support.hubs import open_hub

from hub_server.db.bulk_load import commit_versions
from hub_server.db.catalog import NewVersion, StoredFile, Viewer

STAMPS = {"created_at", "updated_at", "upload_time"}  # a push's clock, not what it wrote


def version(name: str, number: str, **kw: Any) -> tuple[NewVersion, list[StoredFile]]:
    fields: dict[str, Any] = {
        "owner": "ada",
        "name": name,
        "distribution": name,
        "version": number,
        "content_hash": f"hash-{name}-{number}",
        "requires_python": ">=3.10",
        "dependencies": ["numpy>=1"],
        "summary": f"a maze environment {name} {number}",
        "top_level": [name.replace("-", "_")],
        "visibility": None,
        "readme": None,
        "description": None,
        "tags": ["maze"],
    }
    fields.update(kw)
    files = [
        StoredFile(
            kind,
            f"{name}-{number}.{ext}",
            f"{kind}{number}",
            10 + len(kind),
            f"b-{kind}",
            None,
            None,
        )
        for kind, ext in (("wheel", "whl"), ("sdist", "tar.gz"))
    ]
    return NewVersion(**fields), files


def everything(state: Any) -> dict[str, list[dict]]:
    tables = {
        "environments": "id",
        "environment_tags": "env_id, tag",
        "versions": "id",
        "files": "id",
    }
    with state.database.read() as db:
        return {
            table: [
                {k: v for k, v in dict(row).items() if k not in STAMPS}
                for row in db.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
            ]
            for table, order in tables.items()
        }


def searches(state: Any) -> list[Any]:
    found = []
    for viewer in (Viewer(), Viewer(("ada",))):
        for q, tag in ((None, None), ("maze", None), ("walls", None), (None, "dark"), ("e2", None)):
            rows, total = state.search._compute(viewer, (q, None, tag, "name", 1, 50))
            found.append(([(r.id, r.name, r.latest_version, r.description) for r in rows], total))
    return found


def test_a_bulk_load_leaves_the_rows_commits_one_by_one_leave(hub_backend, fresh_backend, tmp_path):
    before = version("old-env", "1.0.0", readme="# old", tags=["maze", "dark"])
    batch = [
        version("old-env", "2.0.0", tags=[]),  # keeps its tags and README
        *(version(f"e{i}", "1.0.0", visibility="private" if i == 3 else None) for i in range(5)),
        version("e1", "2.0.0rc1", tags=["dark", "maze", "dark"]),  # a pre-release is not latest
        version("e2", "1.1.0", description="walls and corridors", readme="# e2"),
        version("e2", "0.9.0", summary=None, tags=[]),  # an older one, after: latest stays 1.1.0
        version("e4", "1.0.1", visibility="public", tags=["dark"]),
        version("old-env", "1.5.0", readme="# newer", tags=["dark"]),
    ]
    loaded = {}
    for label, backend in (("one by one", hub_backend), ("bulk", fresh_backend)):
        state = open_hub(backend, tmp_path / label)
        try:
            state.create_user("ada")
            state.catalog.commit_version(*before)
            if label == "bulk":
                commit_versions(state.database, batch)
            else:
                for new, files in batch:
                    state.catalog.commit_version(new, files)
            loaded[label] = (everything(state), searches(state))
        finally:
            state.close()
    rows, found = loaded["bulk"]
    assert rows == loaded["one by one"][0]
    assert found == loaded["one by one"][1]
    envs = {env["name"]: env for env in rows["environments"]}
    assert len(rows["versions"]) == 12 and len(rows["files"]) == 24
    assert (envs["e2"]["latest_version"], envs["e2"]["serial"]) == ("1.1.0", 3)
    assert (envs["old-env"]["readme"], envs["old-env"]["tags"]) == ("# newer", '["dark"]')
    assert envs["e3"]["visibility"] == "private"
    assert found[1][1] == 5 and found[3][1] == 3  # the search index holds the loaded rows
