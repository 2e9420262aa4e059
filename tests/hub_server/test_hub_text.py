"""What text the hub stores and looks up, the same on both backends (third attack pass: F10,
F11): a NUL character (PostgreSQL's ``text`` cannot hold one; SQLite can) or a lone surrogate
(not UTF-8) is refused with a code wherever it arrives, lookups included, and the storage layer
refuses whatever a route did not check, never with a 500; owner names that read alike are one
name. A real hub process on loopback, on both storage backends."""

from __future__ import annotations

import json
import secrets
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from support.hubs import error_code as code
from support.hubs import eval_files, package, publish, serving, user, wheel

from hub_client.client import HubClient
from hub_server.errors import HubError


@pytest.fixture(scope="module")
def hub(tmp_path_factory, hub_backend):
    with serving(tmp_path_factory, hub_backend) as running:
        yield running


def api(hub, token, method, path, json_body=None, **kwargs) -> httpx.Response:
    """A request as any client may send it: the JSON body ASCII-escaped (``\\ud800`` is valid
    JSON, and decodes to a lone surrogate)."""
    headers = {"Authorization": f"Bearer {token}"}
    if json_body is not None:
        kwargs["content"] = json.dumps(json_body)
        headers["Content-Type"] = "application/json"
    return httpx.request(method, hub["url"] + path, headers=headers, timeout=60, **kwargs)


def published(hub) -> tuple[str, str, str]:
    """(owner, token, environment) with version 1.0.0 published."""
    owner, token = user(hub)
    env = f"txt-{uuid.uuid4().hex[:6]}"
    assert publish(hub, token, owner, env, wheel(env)).status_code == 201
    return owner, token, env


def publish_with(hub, owner, token, env, value: str, field: str) -> httpx.Response:
    """Version 2.0.0 published with ``value`` in the form's ``field`` (a tag for ``tags``)."""
    form = {"tags": json.dumps([value])} if field == "tags" else {field: value}
    return publish(hub, token, owner, env, wheel(env, "2.0.0"), **form)


def eval_with_model(hub, owner, token, env, model: str) -> httpx.Response:
    version = httpx.get(f"{hub['url']}/api/v1/environments/{owner}/{env}/versions/1.0.0").json()
    files = eval_files(version, uuid.uuid4().hex, [1.0], model=model)
    path = f"/api/v1/environments/{owner}/{env}/versions/1.0.0/evals"
    return api(hub, token, "POST", path, files=files)


WRITES = {
    "description": lambda h, o, t, e, v: publish_with(h, o, t, e, v, "description"),
    "readme": lambda h, o, t, e, v: publish_with(h, o, t, e, v, "readme"),
    "tag": lambda h, o, t, e, v: publish_with(h, o, t, e, v, "tags"),
    "summary": lambda h, o, t, e, v: publish(
        h, t, o, "arc-env", package(metadata=f"Summary: {v}\n")
    ),
    "token-name": lambda h, o, t, e, v: api(h, t, "POST", "/api/v1/tokens", json_body={"name": v}),
    "yank-reason": lambda h, o, t, e, v: api(
        h, t, "POST", f"/api/v1/environments/{o}/{e}/versions/1.0.0/yank", json_body={"reason": v}
    ),
    "eval-model": eval_with_model,
}


# form fields and METADATA arrive as bytes and are decoded: only JSON can carry a lone
# surrogate (a JSON body's model refuses it as any text no backend stores: invalid_text too)
CASES = [(field, "a\x00b") for field in sorted(WRITES)] + [
    (field, "a\ud800b") for field in ("eval-model", "tag", "token-name", "yank-reason")
]


@pytest.mark.parametrize(("field", "bad"), CASES, ids=[f"{f}-{ascii(b)[2:-2]}" for f, b in CASES])
def test_text_a_backend_cannot_store_is_refused_with_a_code(hub, field, bad):
    """The same answer on both backends: SQLite used to store a NUL and PostgreSQL to answer
    500; a lone surrogate (JSON's ``\\ud800``) was a 500 on both. The clean request then works,
    so nothing half-stored blocks it."""
    owner, token, env = published(hub)
    refused = WRITES[field](hub, owner, token, env, bad)
    assert refused.status_code == 400 and code(refused) == "invalid_text", refused.text
    done = WRITES[field](hub, owner, token, env, "fine")
    assert done.status_code in (200, 201), done.text


def test_lookups_of_text_no_name_can_hold_are_answered_with_a_code(hub):
    owner, token, env = published(hub)
    answers = {
        f"/api/v1/environments/{owner}/x%00y": (404, "environment_not_found"),
        f"/api/v1/environments/{owner}%00/{env}/versions": (404, "environment_not_found"),
        f"/api/v1/environments/{owner}/{env}/versions/1.0%00": (400, "invalid_version"),
        "/api/v1/environments?tag=a%00": (400, "invalid_text"),
        f"/api/v1/environments?owner={owner}%00": (400, "invalid_text"),
        "/api/v1/environments?q=%00": (400, "invalid_text"),
        f"/simple/{owner}%00/{env}/{env}/": (404, "environment_not_found"),
        f"/simple/{owner}/{env}%00/": (404, "environment_not_found"),
        f"/files/{owner}/{env}/x%00.whl": (400, "invalid_text"),
        f"/api/v1/environments/{owner}/{env}/versions/1.0.0/datasets/{2**70}/data.parquet": (
            400,
            "invalid_number",
        ),
    }
    for path, (status, expected) in answers.items():
        resp = api(hub, token, "GET", path)
        assert (resp.status_code, code(resp)) == (status, expected), (path, resp.text)
    too_big = api(hub, token, "DELETE", f"/api/v1/tokens/{2**70}")
    assert too_big.status_code == 400 and code(too_big) == "invalid_number", too_big.text
    for page in (f"/u/{owner}%00", f"/e/{owner}/{env}%00"):
        assert httpx.get(hub["url"] + page).status_code == 404
    assert httpx.get(f"{hub['url']}/u/{owner}").status_code == 200
    assert httpx.get(f"{hub['url']}/api/v1/environments", params={"owner": owner}).json()["total"]


def test_digits_of_other_scripts_are_answered_with_a_code_not_a_500(hub):
    """``str.isdigit`` holds for ``²`` and ``١``, which ``int`` refuses or reads as a number: an
    outside attack got a 500 from anonymous GETs of ``/api/v1/evaluations/²`` and
    ``/api/v1/environments?page=²`` (the search fast path). Only ASCII digits are numbers."""
    owner, token, env = published(hub)
    answers = {
        "/api/v1/evaluations/%C2%B2": (404, "evaluation_not_found"),
        "/api/v1/evaluations/%D9%A1/samples": (404, "evaluation_not_found"),
        "/api/v1/environments?page=%C2%B2": (422, "invalid_request"),
        "/api/v1/environments?per_page=%D9%A1%D9%A2": (422, "invalid_request"),
    }
    for path, (status, expected) in answers.items():
        resp = httpx.get(hub["url"] + path, timeout=60)
        assert (resp.status_code, code(resp)) == (status, expected), (path, resp.text)
    assert httpx.get(hub["url"] + "/dashboard/evaluations/%C2%B2").status_code == 404
    body = {"metadata": {"a": 1}, "environments": [{"id": "²"}]}
    opened = api(hub, token, "POST", "/api/v1/evaluations/", body)
    assert (opened.status_code, code(opened)) == (404, "environment_not_found"), opened.text
    listing = httpx.get(f"{hub['url']}/api/v1/environments", params={"owner": owner, "page": "1"})
    assert listing.status_code == 200 and listing.json()["items"][0]["name"] == env


def test_the_storage_layer_refuses_what_no_route_checked_on_both_backends(hub):
    """The net under every statement: a value either backend cannot store is a coded 400 from
    the storage layer itself, before the database sees it; a key too large for PostgreSQL's
    index (which SQLite keeps) is a coded 400 there, not a 500."""
    store = hub["backend"].hub(hub["data"])
    try:
        for call in (
            lambda: store.catalog.environment("a\x00", "b"),
            lambda: store.accounts.create_token(1, "\ud800", ["read"], None),
            lambda: store.catalog.environment_by_id(2**70),
        ):
            with pytest.raises(HubError) as refused:
                call()
            assert refused.value.status == 400
            assert refused.value.code in ("invalid_text", "invalid_number")
        if hub["backend"].name == "postgresql":
            env_id = store.catalog.environment(*published(hub)[::2]).id
            huge = secrets.token_urlsafe(30_000)  # random: PostgreSQL cannot compress it to fit
            insert = "INSERT INTO environment_tags (env_id, tag) VALUES (?, ?)"
            with pytest.raises(HubError) as refused, store.database.transaction() as db:
                db.execute(insert, (env_id, huge))
            assert (refused.value.status, refused.value.code) == (400, "invalid_value")
    finally:
        store.close()


def test_values_too_large_for_an_index_are_refused_alike(hub):
    """A tag is a key of an index, and PostgreSQL's cannot hold a long one: both backends refuse
    it at the route (a 500 on PostgreSQL before). A filename is a key too, and a file on the
    installer's disk: at most 200 characters before its extension."""
    owner, token, env = published(hub)
    long_tag = publish(
        hub, token, owner, env, wheel(env, "2.0.0"), tags=json.dumps([secrets.token_urlsafe(9000)])
    )
    assert long_tag.status_code == 400 and code(long_tag) == "invalid_tags", long_tag.text
    platform = "x" * 1000
    name, data = wheel(env, "2.0.0")
    long_name = publish(hub, token, owner, env, (name.replace("-any", f"-{platform}"), data))
    assert long_name.status_code == 400 and code(long_name) == "invalid_filename"
    assert publish(hub, token, owner, env, wheel(env, "2.0.0"), tags='["fine"]').status_code == 201


# --- owner names ------------------------------------------------------------------------------------


def test_owner_names_that_read_alike_are_one_name(hub):
    """``al.ice``, ``alice-`` and ``alice_`` beside ``alice`` would pass for her on every page
    and install line: refused, for users and teams, through the API and through
    ``prime hub create-user`` (the function it calls); ``alice\\n`` is no name at all."""
    base = f"carol{uuid.uuid4().hex[:6]}"
    admin = HubClient(hub["url"], hub["admin"])
    admin.create_user(base)
    spellings = [f"{base}-", f"{base}_", f"c.a-r_o.l{base[5:]}", f"{base[:3]}.{base[3:]}"]
    for spelling in spellings:
        resp = api(hub, hub["admin"], "POST", "/api/v1/users", json_body={"name": spelling})
        assert resp.status_code == 409 and code(resp) == "name_taken", (spelling, resp.text)
        assert "reads as the name of an existing user or team" in resp.text
        team = api(hub, hub["admin"], "POST", "/api/v1/teams", json_body={"name": spelling})
        assert team.status_code == 409 and code(team) == "name_taken", team.text
    with pytest.raises(HubError) as cli:
        hub["backend"].create_user(hub["data"], spellings[0])
    assert cli.value.code == "name_taken"
    newline = api(hub, hub["admin"], "POST", "/api/v1/users", json_body={"name": base + "\n"})
    assert newline.status_code == 400 and code(newline) == "invalid_name", newline.text
    assert admin.create_user(base + "ine").token  # a different name is still free


def test_only_one_of_names_that_read_alike_is_created_at_once(hub):
    """Twelve spellings of one name created concurrently: exactly one wins (PostgreSQL
    serializes the check under a lock, SQLite under its one writer)."""
    base = f"dave{uuid.uuid4().hex[:6]}"
    spellings = [base, f"{base}-", f"{base}_", f"d.{base[1:]}", f"d-{base[1:]}", f"d_{base[1:]}"]
    spellings += [f"{s}." for s in spellings]

    def create(name: str) -> int:
        return api(hub, hub["admin"], "POST", "/api/v1/users", json_body={"name": name}).status_code

    with ThreadPoolExecutor(len(spellings)) as pool:
        codes = list(pool.map(create, spellings))
    assert sorted(codes) == [201] + [409] * (len(spellings) - 1), codes


DEEP = "[" * 100_000 + "]" * 100_000  # past what Python's json module recurses into


def test_json_nested_too_deeply_is_refused_with_a_code_wherever_it_arrives(hub):
    """Outside attack pass 4: a tags field or an eval's metadata.json nested 5,000 deep was a
    500 (a RecursionError in json.loads), a JSON body too; each is a coded 400, and the clean
    request then works."""
    owner, token, env = published(hub)
    tags = publish(hub, token, owner, env, wheel(env, "2.0.0"), tags=DEEP)
    assert tags.status_code == 400 and code(tags) == "invalid_tags", tags.text
    body = httpx.post(
        hub["url"] + "/api/v1/tokens",
        content='{"name": ' + DEEP + "}",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=60,
    )
    assert body.status_code == 400 and code(body) and body.json()["detail"], body.text
    version = httpx.get(f"{hub['url']}/api/v1/environments/{owner}/{env}/versions/1.0.0").json()
    files = eval_files(version, uuid.uuid4().hex, [1.0])
    files["metadata"] = ("metadata.json", DEEP.encode())
    path = f"/api/v1/environments/{owner}/{env}/versions/1.0.0/evals"
    deep_eval = api(hub, token, "POST", path, files=files)
    assert deep_eval.status_code == 400 and code(deep_eval) == "invalid_eval", deep_eval.text
    assert publish(hub, token, owner, env, wheel(env, "2.0.0")).status_code == 201
