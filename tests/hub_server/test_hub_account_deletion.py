"""Deleting a hub account (issue 43's retention rule, issue 40's "identities are never reused"),
on both storage backends against a real hub process: everything the account owned goes (its
environments and their bytes in the store, its solo team, its evals on others' environments, its
tokens and web sessions, its team memberships), its version numbers stay retired, and a user who
registers the same name later gets nothing of it: no page, cached page, search answer, file,
token, permission or team. Then the refusals (scopes, the last admin, a team's last owner) and
``prime account delete``."""

from __future__ import annotations

import hashlib
import socket
import time
from urllib.parse import urlsplit

import httpx
import pytest
from support.hubs import (
    error_code,
    eval_files,
    open_hub,
    prime,
    publish,
    serving,
    stored,
    wheel,
)

from hub_client.client import HubClient
from hub_server.services.blob_collection import collect_orphan_blobs

PEP691 = "application/vnd.pypi.simple.v1+json"
PAGE_FORM = "application/x-www-form-urlencoded"


@pytest.fixture(scope="module")
def hub(tmp_path_factory, hub_backend):
    with serving(tmp_path_factory, hub_backend) as running:
        yield running


def auth(token: str | None) -> dict:
    return {"Authorization": f"Bearer {token}"} if token else {}


def register(hub, name: str, admin: bool = False) -> str:
    return HubClient(hub["url"], hub["admin"]).create_user(name, admin).token


def sign_in(hub, token: str) -> str:
    """A web session for ``token``, through the hub's own sign-in form."""
    form = httpx.get(f"{hub['url']}/login")
    (cookie, value), *_ = form.cookies.items()
    signed = httpx.post(
        f"{hub['url']}/login",
        data={"token": token, "csrf": value},
        cookies={cookie: value},
        headers={"Content-Type": PAGE_FORM, "Origin": hub["url"]},
    )
    assert signed.status_code == 303, signed.text
    return signed.cookies["vfh_session"]


def reads(hub, owner: str, name: str, token: str | None, session: str | None = None) -> str:
    """Every read that shows ``owner/name``: both index pages twice (the second from the cache),
    the file listing's URLs, the API's environment and versions, its web page, the owner's page
    and a search; each answers 200 or 404. Concatenated."""
    url = f"{hub['url']}/simple/{owner}/{name}/{name}/"
    basic = ("__token__", token) if token else None
    cookies = {"vfh_session": session} if session else None
    api = f"{hub['url']}/api/v1/environments"
    answers = [
        httpx.get(url, headers={"Accept": PEP691}, auth=basic),
        httpx.get(url, auth=basic),
        httpx.get(url, headers={"Accept": PEP691}, auth=basic),
        httpx.get(url, auth=basic),
        httpx.get(f"{api}/{owner}/{name}", headers=auth(token)),
        httpx.get(f"{api}/{owner}/{name}/versions", headers=auth(token)),
        httpx.get(f"{hub['url']}/e/{owner}/{name}", cookies=cookies),
        httpx.get(f"{hub['url']}/u/{owner}", cookies=cookies),
        httpx.get(api, params={"owner": owner}, headers=auth(token)),
    ]
    assert all(a.status_code in (200, 404) for a in answers), [
        (str(a.url), a.status_code) for a in answers
    ]
    return "\n".join(a.text for a in answers)


def wheel_url(hub, owner: str, name: str, version: str) -> str:
    return f"{hub['url']}/files/{owner}/{name}/{name.replace('-', '_')}-{version}-py3-none-any.whl"


def test_a_deleted_account_leaves_nothing_to_whoever_registers_its_name_next(hub):
    name = f"gone{time.time_ns() % 10**9}"
    team, other_team = f"{name}-crew", f"{name}-club"
    token = register(hub, name)
    bob = f"bob{time.time_ns() % 10**9}"
    bob_token = register(hub, bob)
    extra = httpx.post(
        f"{hub['url']}/api/v1/tokens",
        json={"name": "ci", "scopes": ["read"]},
        headers=auth(token),
    ).json()["token"]
    session = sign_in(hub, token)
    # what the account owns: a private and a public environment (one version deleted, so
    # retired), a team of its own with a private environment, a membership in bob's team and
    # an eval on that team's environment
    secret = wheel("secret-env", "1.0.0", extra=[("secret_env/hidden.py", "QUOKKA = 1\n")])
    assert (
        publish(
            hub, token, name, "secret-env", secret, visibility="private", description="quokka"
        ).status_code
        == 201
    )
    for version in ("1.0.0", "1.1.0"):
        assert publish(hub, token, name, "open-env", wheel("open-env", version)).status_code == 201
    deleted = f"{hub['url']}/api/v1/environments/{name}/open-env/versions/1.1.0"
    assert httpx.delete(deleted, headers=auth(token)).status_code == 204
    assert (
        httpx.post(
            f"{hub['url']}/api/v1/teams", json={"name": team}, headers=auth(token)
        ).status_code
        == 201
    )
    team_wheel = wheel("crew-env", "1.0.0")
    assert (
        publish(hub, token, team, "crew-env", team_wheel, visibility="private").status_code == 201
    )
    teams = f"{hub['url']}/api/v1/teams"
    assert httpx.post(teams, json={"name": other_team}, headers=auth(bob_token)).status_code == 201
    added = httpx.post(
        f"{teams}/{other_team}/members", json={"user": name}, headers=auth(bob_token)
    )
    assert added.status_code == 201
    club_wheel = wheel("club-env", "1.0.0")
    assert publish(hub, bob_token, other_team, "club-env", club_wheel).status_code == 201
    hidden = publish(
        hub, bob_token, other_team, "club-hidden", wheel("club-hidden"), visibility="private"
    )
    assert hidden.status_code == 201
    club = f"{hub['url']}/api/v1/environments/{other_team}/club-env"
    version = httpx.get(f"{club}/versions/1.0.0", headers=auth(token)).json()
    evals = f"{club}/versions/1.0.0/evals"
    posted = httpx.post(evals, files=eval_files(version, "gone-run", [1.0]), headers=auth(token))
    assert posted.status_code == 201, posted.text
    # every page read (and cached) as the account sees it
    seen = reads(hub, name, "secret-env", token, session) + reads(hub, team, "crew-env", token)
    assert "quokka" in seen and "secret_env-1.0.0" in seen and "crew_env-1.0.0" in seen
    assert (
        httpx.get(wheel_url(hub, name, "secret-env", "1.0.0"), auth=("__token__", token)).content
        == secret[1]
    )
    assert [e["uploaded_by"] for e in httpx.get(evals).json()] == [name]
    mine = httpx.get(f"{hub['url']}/api/v1/evaluations/", headers=auth(token)).json()
    assert mine["total"] == 1
    assert "signed in as" in httpx.get(f"{hub['url']}/", cookies={"vfh_session": session}).text
    blobs = {hashlib.sha256(w[1]).hexdigest() for w in (secret, team_wheel)}
    assert blobs <= stored(hub["backend"], hub["data"])

    gone = httpx.delete(f"{hub['url']}/api/v1/me", headers=auth(token))
    assert gone.status_code == 200, gone.text
    assert gone.json() == {
        "user": name,
        "teams": [team],
        "environments": [f"{name}/secret-env", f"{name}/open-env", f"{team}/crew-env"],
    }
    # the attack: register the name again (and the team's), and look for anything of the old one
    new_token = register(hub, name)
    for old in (token, extra):
        assert httpx.get(f"{hub['url']}/api/v1/me", headers=auth(old)).status_code == 401
    home = httpx.get(f"{hub['url']}/", cookies={"vfh_session": session}).text
    assert "signed in as" not in home
    me = httpx.get(f"{hub['url']}/api/v1/me", headers=auth(new_token)).json()
    assert me["owners"] == [name]  # no team: not the solo one, not bob's
    tokens = httpx.get(f"{hub['url']}/api/v1/tokens", headers=auth(new_token)).json()
    assert [t["name"] for t in tokens] == ["initial"]
    for who in (None, new_token, bob_token, hub["admin"]):
        shown = reads(hub, name, "secret-env", who) + reads(hub, team, "crew-env", who)
        shown += reads(hub, name, "open-env", who)
        for old_thing in ("quokka", "secret_env-1.0.0", "crew_env", "open_env", "hidden.py"):
            assert old_thing not in shown, (who, old_thing)
        found = httpx.get(
            f"{hub['url']}/api/v1/environments", params={"q": "quokka"}, headers=auth(who)
        )
        assert "secret-env" not in found.text
        for url in (
            wheel_url(hub, name, "secret-env", "1.0.0"),
            wheel_url(hub, team, "crew-env", "1.0.0"),
        ):
            assert httpx.get(url, auth=("__token__", who) if who else None).status_code == 404
    assert httpx.get(evals).json() == []
    mine = httpx.get(f"{hub['url']}/api/v1/evaluations/", headers=auth(new_token)).json()
    assert mine["total"] == 0 and mine["evaluations"] == []
    # no permission of the old account: bob's team's private environment, publishing there
    hidden_url = f"{hub['url']}/api/v1/environments/{other_team}/club-hidden"
    assert httpx.get(hidden_url, headers=auth(new_token)).status_code == 404
    refused = publish(hub, new_token, other_team, "club-env", wheel("club-env", "2.0.0"))
    assert refused.status_code == 403
    for kept in (club, hidden_url):  # bob's team keeps its own
        assert httpx.get(kept, headers=auth(bob_token)).status_code == 200
    # a published name@version never resolves to other bytes, whoever owns the name now
    for env, ver in (("secret-env", "1.0.0"), ("open-env", "1.0.0"), ("open-env", "1.1.0")):
        again = publish(hub, new_token, name, env, wheel(env, ver))
        assert again.status_code == 409 and error_code(again) == "version_exists", again.text
        assert "published and deleted" in again.json()["error"]["message"]
    # the bytes leave the store at the collector's next round
    store = open_hub(hub["backend"], hub["data"])
    try:
        collect_orphan_blobs(store, clock=lambda: time.time() + 7200)
    finally:
        store.close()
    assert not blobs & stored(hub["backend"], hub["data"])

    # legitimate: the new owner of the name publishes and reads its own, and makes the team again
    fresh = publish(hub, new_token, name, "secret-env", wheel("secret-env", "2.0.0"))
    assert fresh.status_code == 201, fresh.text
    listing = httpx.get(
        f"{hub['url']}/simple/{name}/secret-env/secret-env/", headers={"Accept": PEP691}
    ).json()
    assert [f["filename"] for f in listing["files"]] == ["secret_env-2.0.0-py3-none-any.whl"]
    assert (
        httpx.post(
            f"{hub['url']}/api/v1/teams", json={"name": team}, headers=auth(new_token)
        ).status_code
        == 201
    )
    assert (
        httpx.get(
            f"{hub['url']}/api/v1/environments/{team}/crew-env", headers=auth(new_token)
        ).status_code
        == 404
    )


def test_an_account_is_deleted_only_by_its_owner_with_a_writing_token_or_by_an_admin(hub):
    name, other = f"own{time.time_ns() % 10**9}", f"oth{time.time_ns() % 10**9}"
    token, other_token = register(hub, name), register(hub, other)
    reader = httpx.post(
        f"{hub['url']}/api/v1/tokens", json={"name": "r", "scopes": ["read"]}, headers=auth(token)
    ).json()["token"]
    # attacks: a read-only token, another user, an unknown name, nobody
    ro = httpx.delete(f"{hub['url']}/api/v1/me", headers=auth(reader))
    assert ro.status_code == 403 and error_code(ro) == "insufficient_scope"
    stranger = httpx.delete(f"{hub['url']}/api/v1/users/{name}", headers=auth(other_token))
    assert stranger.status_code == 403 and error_code(stranger) == "admin_required"
    assert httpx.delete(f"{hub['url']}/api/v1/me").status_code == 401
    unknown = httpx.delete(f"{hub['url']}/api/v1/users/nobody-here", headers=auth(hub["admin"]))
    assert unknown.status_code == 404 and error_code(unknown) == "user_not_found"
    assert httpx.get(f"{hub['url']}/api/v1/me", headers=auth(token)).status_code == 200
    # the hub's only admin stays (no one could create users through the API any more)
    last = httpx.delete(f"{hub['url']}/api/v1/me", headers=auth(hub["admin"]))
    assert last.status_code == 409 and error_code(last) == "last_admin", last.text
    # legitimate: an admin deletes another user's account
    by_admin = httpx.delete(f"{hub['url']}/api/v1/users/{other}", headers=auth(hub["admin"]))
    assert by_admin.status_code == 200 and by_admin.json()["user"] == other
    assert httpx.get(f"{hub['url']}/api/v1/me", headers=auth(other_token)).status_code == 401
    assert httpx.get(f"{hub['url']}/api/v1/me", headers=auth(token)).status_code == 200


def test_a_teams_last_owner_removes_its_members_before_the_account_goes(hub):
    owner, member = f"lead{time.time_ns() % 10**9}", f"memb{time.time_ns() % 10**9}"
    token, member_token = register(hub, owner), register(hub, member)
    team = f"{owner}-team"
    teams = f"{hub['url']}/api/v1/teams"
    assert httpx.post(teams, json={"name": team}, headers=auth(token)).status_code == 201
    members = f"{teams}/{team}/members"
    assert httpx.post(members, json={"user": member}, headers=auth(token)).status_code == 201
    assert publish(hub, token, team, "kept-env", wheel("kept-env")).status_code == 201
    refused = httpx.delete(f"{hub['url']}/api/v1/me", headers=auth(token))
    assert refused.status_code == 409 and error_code(refused) == "last_owner", refused.text
    assert team in refused.json()["error"]["message"]
    team_env = f"{hub['url']}/api/v1/environments/{team}/kept-env"
    assert httpx.get(team_env).status_code == 200  # nothing went
    # a member's account goes without touching the team
    gone = httpx.delete(f"{hub['url']}/api/v1/me", headers=auth(member_token))
    assert gone.status_code == 200 and gone.json()["teams"] == []
    assert httpx.get(team_env).status_code == 200
    # now the last owner is the only member: the team goes with the account
    gone = httpx.delete(f"{hub['url']}/api/v1/me", headers=auth(token))
    assert gone.status_code == 200 and gone.json()["teams"] == [team], gone.text
    assert httpx.get(team_env).status_code == 404


def test_prime_account_delete_needs_yes_and_deletes_your_own_or_as_admin_anothers(hub, tmp_path):
    name, other = f"cli{time.time_ns() % 10**9}", f"clo{time.time_ns() % 10**9}"
    token, other_token = register(hub, name), register(hub, other)
    assert publish(hub, token, name, "cli-env", wheel("cli-env")).status_code == 201
    unconfirmed = prime(hub, token, "account", "delete", cwd=tmp_path, check=False)
    assert unconfirmed.returncode == 2 and "--yes" in unconfirmed.stderr
    assert httpx.get(f"{hub['url']}/api/v1/me", headers=auth(token)).status_code == 200
    not_admin = prime(
        hub, token, "account", "delete", "--user", other, "--yes", cwd=tmp_path, check=False
    )
    assert not_admin.returncode == 1 and "admin" in not_admin.stderr
    done = prime(hub, token, "account", "delete", "--yes", cwd=tmp_path)
    assert f"deleted the account of {name}" in done.stdout and f"{name}/cli-env" in done.stdout
    assert httpx.get(f"{hub['url']}/api/v1/me", headers=auth(token)).status_code == 401
    as_admin = prime(hub, hub["admin"], "account", "delete", "--user", other, "--yes", cwd=tmp_path)
    assert f"deleted the account of {other}" in as_admin.stdout
    assert httpx.get(f"{hub['url']}/api/v1/me", headers=auth(other_token)).status_code == 401


def test_a_push_uploading_while_its_account_is_deleted_publishes_nothing(hub):
    """The push was authorized when it began; its account is deleted (and the name registered
    again) while its body is still arriving. Its commit finds its token gone and publishes
    nothing: no environment lands in a namespace whose owner is gone, or is someone else now."""
    name = f"mid{time.time_ns() % 10**9}"
    token = register(hub, name)
    url = f"{hub['url']}/api/v1/environments/{name}/late-env/versions"
    upload = httpx.Request("POST", url, files={"wheel": wheel("late-env")}, headers=auth(token))
    body = upload.read()
    parts = urlsplit(url)
    head = (
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: {upload.headers['content-type']}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as sock:
        sock.sendall(head.encode() + body[: len(body) // 2])
        time.sleep(1.0)  # the request is under way, authorized
        gone = httpx.delete(f"{hub['url']}/api/v1/me", headers=auth(token))
        assert gone.status_code == 200, gone.text
        new_token = register(hub, name)
        sock.sendall(body[len(body) // 2 :])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    assert status in (401, 403) and b"invalid_token" in answer, answer[:400]
    env = f"{hub['url']}/api/v1/environments/{name}/late-env"
    assert httpx.get(env, headers=auth(new_token)).status_code == 404
    # legitimate: the name's new owner publishes it
    assert publish(hub, new_token, name, "late-env", wheel("late-env")).status_code == 201
