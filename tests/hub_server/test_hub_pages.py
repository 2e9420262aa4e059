"""Environment pages at size: what a page lists is read on one connection and is what the API
lists (versions newest first, each with its files and evals); a page not cached yet is made in
a worker thread, never on the event loop, whatever its README; the whole page as every
anonymous viewer sees it is made once per change too."""

from __future__ import annotations

import asyncio
import re
import threading

import httpx
from support.hubs import ReadCounter, eval_files, hub_settings, make_wheel, new_user

from hub_server.app import create_app
from hub_server.db.page_reads import PageRows


def push(hub, token: str, name: str, version: str, **form: str) -> None:
    resp = httpx.post(
        f"{hub['url']}/api/v1/environments/{hub['owner']}/{name}/versions",
        files={"wheel": make_wheel(name, version)},
        data=form,
        headers={"Authorization": f"Bearer {token}"},
        timeout=60,  # the first upload starts the hub's upload workers
    )
    assert resp.status_code == 201, resp.text


def test_a_pages_rows_are_one_read_and_the_page_lists_what_the_api_does(hub):
    """Versions, their files and their evals come from one ``database.read`` (one pooled
    connection on PostgreSQL, not three), equal to the catalog's and the attachments' reads
    apart; the page shows the versions newest first, each with its files' hashes and its own
    evals, and a yank, as the JSON API lists them."""
    token = new_user(hub, "pia")
    hub = {**hub, "owner": "pia"}
    for version in ("1.0.0", "1.1.0", "2.0.0"):
        push(hub, token, "paged-env", version)
    auth = {"Authorization": f"Bearer {token}"}
    api = f"{hub['url']}/api/v1/environments/pia/paged-env"
    assert httpx.post(
        f"{api}/versions/1.1.0/yank", json={"reason": "a broken build"}, headers=auth
    ).is_success
    evals: dict[str, list[int]] = {"1.0.0": [], "1.1.0": [], "2.0.0": []}
    for version, run in (("2.0.0", "run-a"), ("1.0.0", "run-b"), ("2.0.0", "run-c")):
        info = httpx.get(f"{api}/versions/{version}").json()
        resp = httpx.post(
            f"{api}/versions/{version}/evals",
            files=eval_files(info, run, [1.0, 0.0]),
            headers=auth,
        )
        assert resp.status_code == 201, resp.text
        evals[version].append(resp.json()["id"])

    state = hub["backend"].hub(hub["data"])
    try:
        env = state.catalog.environment("pia", "paged-env")
        apart = state.catalog.versions(env.id)
        ids = [v.id for v in apart]
        expected = PageRows(
            apart, state.catalog.files_of_versions(ids), state.attachments.evals(ids)
        )
        reads = ReadCounter(state)
        assert state.pages.rows(env.id) == expected
        assert reads.count == 1
    finally:
        state.close()

    listed = httpx.get(f"{api}/versions").json()
    page = httpx.get(f"{hub['url']}/e/pia/paged-env").text
    rows = re.findall(r'<tr class="version" data-version="([^"]+)">(.*?)</tr>', page, re.S)
    newest_first = [v["version"] for v in reversed(listed)]
    assert [v for v, _ in rows] == newest_first == ["2.0.0", "1.1.0", "1.0.0"]
    for (version, row), info in zip(rows, reversed(listed), strict=True):
        assert [f["sha256"] for f in info["files"]] == re.findall(
            r"</span><br><code>(\w+)</code>", row
        )
        assert re.findall(r'id="eval-(\d+)"', row) == [str(i) for i in evals[version]]
        assert ("a broken build" in row) == (version == "1.1.0")


def test_a_cold_page_is_made_off_the_loop_and_an_anonymous_page_once_per_change(hub):
    """A page not cached yet is made in a worker thread (on PostgreSQL in the same one that
    read its key), short README or long, the same page the hub process serves; the whole page
    as every anonymous viewer sees it is kept beside its content."""
    token = new_user(hub, "ros")
    hub = {**hub, "owner": "ros"}
    short, long = "# Short words\n", "# Long words\n\n" + "lorem ipsum " * 10_000
    push(hub, token, "short-readme", "1.0.0", readme=short)
    push(hub, token, "long-readme", "1.0.0", readme=long)
    settings = hub_settings(hub, public_url=hub["url"])  # the running hub's links
    app = create_app(settings)  # this process's own hub: nothing of these pages cached yet
    state = app.state.hub
    made_in: dict[int, int] = {}
    rows = state.pages.rows

    def recorded(env_id: int) -> PageRows:
        made_in[env_id] = threading.get_ident()
        return rows(env_id)

    state.pages.rows = recorded

    async def pages() -> tuple[int, list[str]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://hub") as client:
            got = [await client.get(f"/e/ros/{n}") for n in ("short-readme", "long-readme")]
        assert [r.status_code for r in got] == [200, 200]
        return threading.get_ident(), [r.text for r in got]

    try:
        loop_thread, (short_page, long_page) = asyncio.run(pages())
        env_ids = [state.catalog.environment("ros", n).id for n in ("short-readme", "long-readme")]
        on_loop = [made_in[env_id] == loop_thread for env_id in env_ids]
        assert on_loop == [False, False]
        assert "Short words</h1>" in short_page and "Long words</h1>" in long_page
        served = httpx.get(f"{hub['url']}/e/ros/short-readme").text  # the hub process's own
        assert strip_csrf(served) == strip_csrf(short_page)
        # the whole page as every anonymous viewer sees it is kept beside its content
        kept = {k[0]: v[0] for k, v in state.page_cache.items() if k[-1] == "anonymous"}
        assert [kept.get(env_id) for env_id in env_ids] == [short_page, long_page]
    finally:
        state.close()


def strip_csrf(page: str) -> str:
    """A page less its viewer's CSRF token (each anonymous viewer gets one of its own)."""
    return re.sub(r'name="csrf" value="[^"]*"', "", page)
