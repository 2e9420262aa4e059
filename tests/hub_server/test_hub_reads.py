"""What readers see: private environments invisible to others, the simple index's standards and
yanking, search and listing (never stale across processes, counting only what a viewer may
see), the fast paths answering like the routes, stable error codes."""

from __future__ import annotations

import asyncio
import hashlib
import json

import httpx
import pytest
from support.hubs import (
    ReadCounter,
    error_code,
    eval_files,
    hub_settings,
    make_wheel,
    new_user,
    publish_raw,
)

from hub_client.client import HubAPIError, HubClient
from hub_server.process import start_hub


def test_private_environments_are_invisible_to_others(hub):
    gina, hal = new_user(hub, "gina"), new_user(hub, "hal")
    resp = httpx.post(
        f"{hub['url']}/api/v1/environments/gina/secret-env/versions",
        files={"wheel": make_wheel("secret-env")},
        data={"visibility": "private"},
        headers={"Authorization": f"Bearer {gina}"},
        timeout=60,  # the first upload starts the hub's upload workers
    )
    assert resp.status_code == 201
    assert HubClient(hub["url"], gina).environment("gina", "secret-env").visibility == "private"
    for token in (None, hal):
        with pytest.raises(HubAPIError) as excinfo:
            HubClient(hub["url"], token).environment("gina", "secret-env")
        assert excinfo.value.code == "environment_not_found"
        assert "secret-env" not in [
            e.name for e in HubClient(hub["url"], token).list_environments().items
        ]
    assert httpx.get(f"{hub['url']}/simple/gina/secret-env/secret-env/").status_code == 404
    assert (
        httpx.get(
            f"{hub['url']}/simple/gina/secret-env/secret-env/", auth=("__token__", gina)
        ).status_code
        == 200
    )


def test_simple_index_standards_and_yanking(hub):
    lee = new_user(hub, "lee")
    for version in ("1.0.0", "1.1.0", "2.0.0rc1"):
        assert (
            publish_raw(hub, lee, "lee", "idx-env", make_wheel("idx-env", version)).status_code
            == 201
        )
    client = HubClient(hub["url"], lee)
    assert (
        client.version("lee", "idx-env", "latest").version == "1.1.0"
    )  # pre-releases only when asked
    client.yank("lee", "idx-env", "1.1.0", "broken scorer")
    assert client.version("lee", "idx-env", "latest").version == "1.0.0"
    page = httpx.get(
        f"{hub['url']}/simple/lee/idx-env/idx-env/",
        headers={"Accept": "application/vnd.pypi.simple.v1+json"},
    ).json()
    assert page["meta"]["api-version"] == "1.1" and page["versions"] == [
        "1.0.0",
        "1.1.0",
        "2.0.0rc1",
    ]
    by_version = {f["filename"].split("-")[1]: f for f in page["files"]}
    assert (
        by_version["1.1.0"]["yanked"] == "broken scorer" and by_version["1.0.0"]["yanked"] is False
    )
    first = by_version["1.0.0"]
    assert first["upload-time"].endswith("Z") and len(first["hashes"]["sha256"]) == 64
    assert first["url"].startswith("/files/")  # path-absolute: pages never embed the Host header
    metadata = httpx.get(hub["url"] + first["url"] + ".metadata").content
    assert hashlib.sha256(metadata).hexdigest() == first["core-metadata"]["sha256"]
    assert b"Name: idx-env" in metadata
    html = httpx.get(f"{hub['url']}/simple/lee/idx-env/idx-env/").text
    assert (
        'data-yanked="broken scorer"' in html
        and "#sha256=" in html
        and "data-core-metadata=" in html
    )
    assert (
        httpx.get(f"{hub['url']}/simple/lee/idx-env/requests/").status_code == 404
    )  # no other project here


def test_search_listing_and_openapi(hub):
    mia = new_user(hub, "mia")
    for name, tags in (("alpha-env", ["games"]), ("beta-env", ["math"])):
        resp = httpx.post(
            f"{hub['url']}/api/v1/environments/mia/{name}/versions",
            files={"wheel": make_wheel(name)},
            data={"tags": json.dumps(tags)},
            headers={"Authorization": f"Bearer {mia}"},
            timeout=60,  # the first upload starts the hub's upload workers
        )
        assert resp.status_code == 201
    client = HubClient(hub["url"])
    assert [e.name for e in client.list_environments(owner="mia", sort="name").items] == [
        "alpha-env",
        "beta-env",
    ]
    assert [e.name for e in client.list_environments(tag="math", owner="mia").items] == ["beta-env"]
    assert [e.name for e in client.list_environments(q="alpha").items] == ["alpha-env"]
    page = client.list_environments(owner="mia", per_page=1, page=2, sort="name")
    assert page.total == 2 and [e.name for e in page.items] == ["beta-env"]
    assert (
        "/api/v1/environments/{owner}/{name}/versions"
        in httpx.get(f"{hub['url']}/openapi.json").json()["paths"]
    )


def test_search_is_never_stale_across_processes_and_counts_only_what_a_viewer_sees(hub):
    """Searches are cached per process under the catalog's generation: a publish, a visibility
    change or a delete made through another hub process shows in this one's next search. The
    count (read from the search index alone) never includes what the viewer may not see."""
    sora, ugo = new_user(hub, "sora"), new_user(hub, "ugo")

    def push(url, name, visibility="public"):
        resp = httpx.post(
            f"{url}/api/v1/environments/sora/{name}/versions",
            files={"wheel": make_wheel(name)},
            data={"visibility": visibility, "description": "zebra crossings"},
            headers={"Authorization": f"Bearer {sora}"},
            timeout=60,  # the first upload starts the hub's upload workers
        )
        assert resp.status_code == 201, resp.text

    def found(url, token=None):
        page = HubClient(url, token).list_environments(q="zebra", sort="name")
        return page.total, [e.name for e in page.items]

    push(hub["url"], "zebra-one")
    assert found(hub["url"]) == (1, ["zebra-one"])
    assert found(hub["url"]) == (1, ["zebra-one"])  # now answered from the cache
    with start_hub(hub["data"], backend=hub["backend"].flags) as second:
        push(second.url, "zebra-two")
        push(second.url, "zebra-hidden", visibility="private")
        assert found(hub["url"]) == (2, ["zebra-one", "zebra-two"])
        assert found(hub["url"], ugo) == (2, ["zebra-one", "zebra-two"])
        assert found(hub["url"], sora) == (3, ["zebra-hidden", "zebra-one", "zebra-two"])
        HubClient(second.url, sora).delete("sora", "zebra-one")
        assert found(hub["url"]) == (1, ["zebra-two"])
        assert found(hub["url"], sora) == (2, ["zebra-hidden", "zebra-two"])


def test_requests_waiting_on_the_loop_share_one_generation_read_that_sees_every_commit(hub):
    """On PostgreSQL whether a cached search or page is current is answered by one read of the
    catalog's generation for all the requests waiting on the event loop, a read that starts
    after they arrived: 40 requests cost one query, and a publish committed before the next
    requests ask is seen by all of them. On SQLite each reads inline (no shared read)."""
    from hub_server.db.catalog import Viewer

    state = hub["backend"].hub(hub["data"])
    try:
        reads = state.database.generation_reads
        if reads is None:
            query = (None, None, None, "updated", 1, 20)
            assert asyncio.run(state.search.known(Viewer(), *query)) is None
            return
        queries = 0
        read = reads._read

        async def counted():
            nonlocal queries
            queries += 1
            return await read()

        reads._read = counted

        async def ask(n):
            try:
                return await asyncio.gather(*(reads.generation() for _ in range(n)))
            finally:
                await reads.aclose()

        before = state.search.generation()
        assert asyncio.run(ask(40)) == [before] * 40 and queries == 1
        token = new_user(hub, "gwen")
        resp = publish_raw(hub, token, "gwen", "generation-env", make_wheel("generation-env"))
        assert resp.status_code == 201, resp.text
        queries = 0
        after = asyncio.run(ask(10))
        assert after == [state.search.generation()] * 10 and after[0] > before
        assert queries == 1
    finally:
        state.close()


def test_the_search_fast_path_answers_like_the_route(hub):
    """Whatever the route would refuse is refused the same way (the fast path hands it over)."""
    base = f"{hub['url']}/api/v1/environments"
    for query, status, code in (
        ("?page=abc", 422, "invalid_request"),
        ("?q=" + "x" * 201, 422, "invalid_request"),
        ("?sort=bogus", 400, "invalid_sort"),
    ):
        resp = httpx.get(base + query)
        assert resp.status_code == status and error_code(resp) == code, (query, resp.text)
    clamped = httpx.get(base + "?per_page=1000&page=-3").json()
    assert clamped["per_page"] == 100 and clamped["page"] == 1
    bad_token = httpx.get(base, headers={"Authorization": "Bearer not-a-token"})
    assert bad_token.status_code == 401 and error_code(bad_token)


def test_the_index_fast_path_answers_like_the_route(hub):
    """A project's index page is answered ahead of the framework in a running hub; the route
    (all ``create_app`` serves, here in process over the same store) answers every case alike:
    both media types, a private environment for its owner and for anyone else, another
    project's name, a name outside the grammar, a bad token."""
    from fastapi.testclient import TestClient

    from hub_server import create_app

    ivy, ivo = new_user(hub, "ivy"), new_user(hub, "ivo")
    for version in ("1.0.0", "1.1.0"):
        resp = httpx.post(
            f"{hub['url']}/api/v1/environments/ivy/fast-env/versions",
            files={"wheel": make_wheel("fast-env", version)},
            data={"visibility": "private"},
            headers={"Authorization": f"Bearer {ivy}"},
            timeout=60,
        )
        assert resp.status_code == 201, resp.text
    settings = hub_settings(hub, build_sdk=False)
    app = create_app(settings)
    routed = TestClient(app)  # no lifespan: no upload workers, no collector
    basic = {ivy: ("__token__", ivy), ivo: ("__token__", ivo)}
    pep691 = {"Accept": "application/vnd.pypi.simple.v1+json"}
    cases = [
        ("/simple/ivy/fast-env/fast-env/", {}, basic[ivy], 200),
        ("/simple/ivy/fast-env/fast-env/", pep691, basic[ivy], 200),
        ("/simple/ivy/fast-env/Fast_Env/", pep691, basic[ivy], 200),
        ("/simple/ivy/fast-env/fast-env/", pep691, None, 404),
        ("/simple/ivy/fast-env/fast-env/", pep691, basic[ivo], 404),
        ("/simple/ivy/fast-env/requests/", pep691, basic[ivy], 404),
        ("/simple/ivy/fast~env/fast-env/", pep691, basic[ivy], 404),
        ("/simple/ivy/fast-env/fast-env/", pep691, ("__token__", "nope"), 401),
    ]
    try:
        for path, headers, auth, status in cases:
            served = httpx.get(hub["url"] + path, headers=headers, auth=auth)
            direct = routed.get(path, headers=headers, auth=auth)
            assert served.status_code == direct.status_code == status, (path, served.text)
            assert served.content == direct.content, path
            media = served.headers["content-type"].split(";")[0]
            assert media == direct.headers["content-type"].split(";")[0], path
        listed = httpx.get(hub["url"] + cases[1][0], headers=pep691, auth=basic[ivy]).json()
        assert listed["versions"] == ["1.0.0", "1.1.0"]
    finally:
        app.state.hub.close()


def test_unknown_routes_and_methods_answer_with_stable_codes(hub):
    missing = httpx.get(f"{hub['url']}/api/v1/nothing-here")
    assert missing.status_code == 404 and error_code(missing) == "not_found"
    wrong = httpx.put(
        f"{hub['url']}/api/v1/environments", headers={"Authorization": f"Bearer {hub['admin']}"}
    )
    assert wrong.status_code == 405 and error_code(wrong) == "method_not_allowed"


def test_an_admin_users_first_token_says_it_holds_admin(hub):
    created = HubClient(hub["url"], hub["admin"]).create_user("second-admin", is_admin=True)
    assert created.scopes == ["admin", "publish", "read"]
    assert HubClient(hub["url"], created.token).me().is_admin


def signed_in(url: str, token: str) -> dict[str, str]:
    """The session cookie of a browser signed in with ``token`` through the hub's own form."""
    form = httpx.get(f"{url}/login")
    (name, value), *_ = form.cookies.items()
    resp = httpx.post(
        f"{url}/login",
        data={"token": token, "csrf": value},
        cookies={name: value},
        headers={"Origin": url},
    )
    assert resp.status_code == 303, resp.text
    return {"vfh_session": resp.cookies["vfh_session"]}


def test_an_environment_pages_key_is_one_read_that_moves_with_each_eval(hub):
    """The page's key (the environment's row and its evals' mark) comes from one database read
    (one pooled connection on PostgreSQL, not two); the mark is the eval count and the newest
    eval's id, and a private environment is refused to another viewer as before."""
    from hub_server.errors import HubError

    token = new_user(hub, "ona")
    for name, visibility in (("one-read-env", "public"), ("one-read-secret", "private")):
        resp = httpx.post(
            f"{hub['url']}/api/v1/environments/ona/{name}/versions",
            files={"wheel": make_wheel(name, "1.0.0")},
            data={"visibility": visibility},
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        assert resp.status_code == 201, resp.text
    state = hub["backend"].hub(hub["data"])
    reads = ReadCounter(state)
    try:
        env, mark = state.environment_for_page("ona", "one-read-env", None)
        assert (env.name, mark, reads.count) == ("one-read-env", (0, 0), 1)
        version = httpx.get(
            f"{hub['url']}/api/v1/environments/ona/one-read-env/versions/1.0.0"
        ).json()
        ids = []
        for run in ("first-run", "second-run"):
            attached = httpx.post(
                f"{hub['url']}/api/v1/environments/ona/one-read-env/versions/1.0.0/evals",
                files=eval_files(version, run, [1.0, 0.0]),
                headers={"Authorization": f"Bearer {token}"},
            )
            assert attached.status_code == 201, attached.text
            ids.append(attached.json()["id"])
            reads.count = 0
            assert state.environment_for_page("ona", "one-read-env", None)[1] == (len(ids), ids[-1])
            assert reads.count == 1
        owner = state.auth.from_token(token)
        own = state.environment_for_page("ona", "one-read-secret", owner)[0]
        assert own.visibility == "private"
        for viewer in (None, state.auth.from_token(new_user(hub, "pax"))):
            with pytest.raises(HubError) as refused:
                state.environment_for_page("ona", "one-read-secret", viewer)
            assert refused.value.status == 404
        with pytest.raises(HubError):
            state.environment_for_page("ona", "no-such-env", owner)
    finally:
        state.close()


def test_environment_pages_are_cached_per_change_and_never_shown_to_another_viewer(hub):
    """An environment page's content is rendered once per change and kept by each hub process;
    the viewer's frame and the visibility check are every request's own. A private page the
    owner has seen is still a 404 to anyone else; a publish, a README, a visibility change, a
    yank, an eval, a deleted version and a deleted environment made through another hub
    process show in this one's next page."""
    kai, lou = new_user(hub, "kai"), new_user(hub, "lou")
    kai_browser, lou_browser = signed_in(hub["url"], kai), signed_in(hub["url"], lou)
    page_url = f"{hub['url']}/e/kai/cached-env"
    frame = 'signed in as <a href="/u/{}">'

    def push(url: str, version: str, **form: str) -> None:
        resp = httpx.post(
            f"{url}/api/v1/environments/kai/cached-env/versions",
            files={"wheel": make_wheel("cached-env", version)},
            data=form,
            headers={"Authorization": f"Bearer {kai}"},
            timeout=60,  # the first upload starts the hub's upload workers
        )
        assert resp.status_code == 201, resp.text

    def seen(cookies: dict[str, str] | None = None) -> httpx.Response:
        return httpx.get(page_url, cookies=cookies)

    push(hub["url"], "1.0.0", visibility="private", readme="# First words")
    for _ in range(2):  # the second from the cache
        own = seen(kai_browser)
        assert own.status_code == 200 and frame.format("kai") in own.text
        assert "First words" in own.text and 'class="private"' in own.text
    for other in (None, lou_browser):
        refused = seen(other)
        assert refused.status_code == 404 and "First words" not in refused.text
    assert frame.format("lou") in seen(lou_browser).text

    with start_hub(hub["data"], backend=hub["backend"].flags) as second:
        kai_there = HubClient(second.url, kai)
        push(second.url, "1.1.0", visibility="public", readme="# Second words")
        for viewer, name in ((None, None), (lou_browser, "lou"), (kai_browser, "kai")):
            page = seen(viewer)
            assert page.status_code == 200 and 'data-version="1.1.0"' in page.text
            assert "Second words" in page.text and "First words" not in page.text
            assert 'class="private"' not in page.text
            framed = [n for n in ("kai", "lou") if frame.format(n) in page.text]
            assert framed == ([name] if name else [])  # each viewer's own frame
        kai_there.yank("kai", "cached-env", "1.0.0", "a broken build")
        assert "a broken build" in seen().text
        version = httpx.get(
            f"{second.url}/api/v1/environments/kai/cached-env/versions/1.1.0"
        ).json()
        attached = httpx.post(
            f"{second.url}/api/v1/environments/kai/cached-env/versions/1.1.0/evals",
            files=eval_files(version, "cached-run", [1.0, 0.0]),
            headers={"Authorization": f"Bearer {kai}"},
        )
        assert attached.status_code == 201, attached.text
        assert f'id="eval-{attached.json()["id"]}"' in seen().text
        kai_there.delete_version("kai", "cached-env", "1.1.0")
        page = seen().text
        assert 'data-version="1.1.0"' not in page and 'data-version="1.0.0"' in page
        kai_there.delete("kai", "cached-env")
        assert seen().status_code == 404 and seen(kai_browser).status_code == 404
        push(second.url, "3.0.0", readme="# Third words")
        page = seen().text
        assert "Third words" in page and "Second words" not in page
        assert 'data-version="1.0.0"' not in page


def test_a_search_for_a_names_words_finds_it_on_either_backend(hub):
    """Both backends index runs of letters and digits: PostgreSQL's parser read "env-99" as
    "env" and the signed number "-99" and a dotted tag as one version token, so searches that
    SQLite answered missed them there."""
    kit = new_user(hub, "kit")
    for name, tags in (("env-99", ["py3.11"]), ("rev_text", ["a/b"]), ("gsm8k-v2", [])):
        resp = httpx.post(
            f"{hub['url']}/api/v1/environments/kit/{name}/versions",
            files={"wheel": make_wheel(name)},
            data={"tags": json.dumps(tags)},
            headers={"Authorization": f"Bearer {kit}"},
            timeout=60,  # the first upload starts the hub's upload workers
        )
        assert resp.status_code == 201, resp.text
    client = HubClient(hub["url"])

    def found(q: str) -> list[str]:
        return sorted(e.name for e in client.list_environments(q=q, owner="kit").items)

    assert found("env-99") == found("99") == found("env 99") == ["env-99"]
    assert found("py3.11") == found("py3 11") == found("11") == ["env-99"]
    assert found("rev_text") == found("text") == ["rev_text"]
    assert found("a/b") == ["rev_text"]
    assert found("gsm8k-v2") == found("v2") == ["gsm8k-v2"]
    assert found("env") == ["env-99"] and found("-") == []


def test_a_postgresql_hub_of_the_schema_before_upgrades_its_search_in_place(
    _postgres_and_s3, tmp_path
):
    """A PostgreSQL hub made before v10 (the parser's own words) holds "env-99"; after the
    upgrade its search finds the name's words as a new hub's does."""
    from hub_server.db import schema
    from hub_server.db.catalog import Viewer
    from hub_server.db.engine import open_database
    from hub_server.db.search import Search

    pg, _ = _postgres_and_s3
    database = open_database(pg.database(), tmp_path)
    try:
        with database.transaction() as db:
            db.execute("CREATE TABLE hub_schema (version INTEGER NOT NULL)")
            for number, script in enumerate(schema.POSTGRESQL[:9], start=1):
                db.execute(script)
                db.execute("INSERT INTO hub_schema (version) VALUES (?)", (number,))
            db.execute(
                "INSERT INTO environments (owner, name, name_key, distribution, visibility,"
                " created_at, updated_at) VALUES ('kit', 'env-99', 'env-99', 'env-99',"
                " 'public', '2026-01-01', '2026-01-01')"
            )

        def found(q: str) -> list[str]:
            rows, _ = Search(database).page(Viewer(), q, None, None, "name", 1, 10)
            return [row.name for row in rows]

        assert found("99") == []  # the parser's "-99"
        schema.migrate(database)
        assert found("99") == found("env-99") == ["env-99"]
    finally:
        database.close()
