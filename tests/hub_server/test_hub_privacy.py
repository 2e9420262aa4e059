"""A private environment is invisible to everyone else, on every route, and no environment can
take another's import name (third attack pass: F3, F8). A real hub process on loopback, on both
storage backends; each attack is followed by the legitimate action that must still work."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from support.hubs import error_code as code
from support.hubs import make_wheel, publish, serving, user, wheel


@pytest.fixture(scope="module")
def hub(tmp_path_factory, hub_backend):
    with serving(tmp_path_factory, hub_backend) as running:
        yield running


def squatting_wheel(name: str, module: str, version: str = "1.0.0") -> tuple[str, bytes]:
    """``name``'s wheel that also installs the top-level package ``module``."""
    return wheel(name, version, extra=[(f"{module}/__init__.py", "x = 1\n")])


@pytest.mark.parametrize(
    "extra",
    [
        [("bobs_env/__init__.py", "x = 1\n")],
        [("bobs_env.py", "x = 1\n")],
        [("sq_env-1.0.0.data/purelib/bobs_env/__init__.py", "x = 1\n")],
        [("bobs_env.cpython-311-x86_64-linux-gnu.so", "\x7fELF")],
    ],
    ids=["package", "module", "purelib", "extension"],
)
def test_an_environment_installs_only_its_own_import_name(hub, extra):
    """Squatting: alice's sq-env also ships ``bobs_env``, the import name of an environment bob
    has not published yet. It is refused, and the refusal names only her own; bob's bobs-env
    then publishes."""
    alice, alice_token = user(hub, "sq")
    bob, bob_token = user(hub, "bob")
    squat = publish(hub, alice_token, alice, "sq-env", wheel("sq-env", extra=extra))
    assert squat.status_code == 400 and code(squat) == "foreign_module", squat.text
    assert "'bobs_env'" in squat.text and "'sq_env'" in squat.text
    assert publish(hub, bob_token, bob, "bobs-env", wheel("bobs-env")).status_code == 201
    assert publish(hub, alice_token, alice, "sq-env", wheel("sq-env")).status_code == 201


def test_an_environments_own_name_is_a_module_or_a_package_spelled_exactly(hub):
    """The legitimate layouts: vf-init's single module (``name.py``) and package (``name/``).
    Imports are case-sensitive, so another spelling is another package's name: an environment
    ``crypto`` may not ship ``Crypto`` (pycryptodome's), nor ``kelvin`` a Kelvin-sign K."""
    owner, token = user(hub)
    assert publish(hub, token, owner, "single-env", make_wheel("single-env")).status_code == 201
    assert publish(hub, token, owner, "pkg-env", wheel("pkg-env")).status_code == 201
    for env, top in (("crypto", "Crypto"), ("cased-env", "Cased_Env"), ("kelvin", "\u212aelvin")):
        refused = publish(hub, token, owner, env, wheel(env, top=top))
        assert refused.status_code == 400 and code(refused) == "foreign_module", refused.text


def test_names_of_what_this_sdk_can_install_and_of_every_pythons_tools_are_not_environments(hub):
    """An environment named ``torch`` (an extra's), ``pip`` or ``test`` (the standard library's
    test package) would stand in for another's module in many a Python."""
    owner, token = user(hub)
    for env in ("torch", "pip", "setuptools", "test", "tests", "multipart"):
        refused = publish(hub, token, owner, env, wheel(env))
        assert refused.status_code == 400 and code(refused) == "foreign_module", (env, refused.text)


def alike(secret: httpx.Response, missing: httpx.Response, names: dict[str, str]) -> bool:
    """The two answers are the same once each side's names are written the same way."""

    def text(resp: httpx.Response, name: str) -> tuple[int, str]:
        body = resp.text
        for spelling in (name, name.replace("-", "_")):
            body = body.replace(spelling, "NAME")
        return resp.status_code, body

    return text(secret, names["secret"]) == text(missing, names["missing"])


def test_a_private_environment_answers_every_route_as_if_it_did_not_exist(hub):
    """F3: bob may not learn that alice's private environment exists, nor its name or modules,
    from any answer: reads, the index, files, pages, yanking, deleting, attaching, publishing
    into her namespace, search, and refusals of his own uploads. Each answer about the private
    environment equals the answer about one that never existed."""
    alice, alice_token = user(hub, "alice")
    bob, bob_token = user(hub, "bob")
    tag = f"t{uuid.uuid4().hex[:8]}"
    secret, missing = f"kraken-{uuid.uuid4().hex[:6]}", f"nothing-{uuid.uuid4().hex[:6]}"
    names = {"secret": secret, "missing": missing}
    made = publish(
        hub,
        alice_token,
        alice,
        secret,
        wheel(secret),
        visibility="private",
        description=f"{tag}word",
        tags=json.dumps([tag]),
    )
    assert made.status_code == 201, made.text
    as_bob = {"Authorization": f"Bearer {bob_token}"}
    cookie = {"Cookie": "vfh_login=fixed"}  # pages carry a form token: the same one for both
    for name in (secret, missing):
        assert httpx.get(f"{hub['url']}/api/v1/environments/{alice}/{name}").status_code == 404

    def answer(method: str, path: str, name: str, **kwargs) -> httpx.Response:
        dist = name.replace("-", "_")
        url = hub["url"] + path.format(owner=alice, name=name, dist=dist)
        return httpx.request(method, url, headers={**as_bob, **cookie}, timeout=60, **kwargs)

    env = "/api/v1/environments/{owner}/{name}"
    eval_files = {"metadata": ("metadata.json", b"{}"), "results": ("results.jsonl", b"")}
    routes = [
        ("GET", env, {}),
        ("GET", env + "/versions", {}),
        ("GET", env + "/versions/1.0.0", {}),
        ("GET", env + "/versions/latest", {}),
        ("GET", env + "/versions/1.0.0/evals", {}),
        ("GET", env + "/versions/1.0.0/datasets", {}),
        ("GET", env + "/versions/1.0.0/datasets/1/data.parquet", {}),
        ("POST", env + "/versions/1.0.0/yank", {"json": {"reason": "mine"}}),
        ("DELETE", env + "/versions/1.0.0", {}),
        ("DELETE", env, {}),
        ("POST", env + "/versions/1.0.0/evals", {"files": eval_files}),
        ("POST", env + "/versions", {"files": {"wheel": wheel("x-env")}}),
        ("GET", "/simple/{owner}/{name}/", {}),
        ("GET", "/simple/{owner}/{name}/{name}/", {}),
        ("GET", "/files/{owner}/{name}/{dist}-1.0.0-py3-none-any.whl", {}),
        ("GET", "/files/{owner}/{name}/{dist}-1.0.0-py3-none-any.whl.metadata", {}),
        ("GET", "/e/{owner}/{name}", {}),
    ]
    for method, path, kwargs in routes:
        seen, unseen = (
            answer(method, path, secret, **kwargs),
            answer(method, path, missing, **kwargs),
        )
        assert seen.status_code in (403, 404), (path, seen.status_code, seen.text)
        assert alike(seen, unseen, names), (path, seen.text, unseen.text)
    for query in ({"q": f"{tag}word"}, {"tag": tag}, {"owner": alice}):
        listed = httpx.get(f"{hub['url']}/api/v1/environments", params=query, headers=as_bob)
        assert listed.json()["total"] == 0 and secret not in listed.text, query
    assert secret not in httpx.get(f"{hub['url']}/u/{alice}").text
    # bob's own uploads: refused alike whether the import name is hers or nobody's, and the
    # distribution name of her private environment is free for him as for anyone
    module = secret.replace("-", "_")
    probes = [
        publish(hub, bob_token, bob, "probe-env", squatting_wheel("probe-env", guess))
        for guess in (module, missing.replace("-", "_"))
    ]
    assert probes[0].status_code == 400 and code(probes[0]) == "foreign_module"
    assert alike(probes[0], probes[1], names) and alice not in probes[0].text
    assert publish(hub, bob_token, bob, secret, wheel(secret)).status_code == 201
    assert publish(hub, bob_token, bob, missing, wheel(missing)).status_code == 201
    # alice still sees and changes her own
    mine = {"Authorization": f"Bearer {alice_token}"}
    assert httpx.get(f"{hub['url']}{env.format(owner=alice, name=secret)}", headers=mine).is_success
    yanked = httpx.post(
        f"{hub['url']}{env.format(owner=alice, name=secret)}/versions/1.0.0/yank",
        json={"reason": "r"},
        headers=mine,
    )
    assert yanked.status_code == 200 and yanked.json()["yanked"]
