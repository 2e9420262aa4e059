"""A typed HTTP client for the hub's JSON API (httpx)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from hub_protocol.wire import (
    AccountDeleted,
    DatasetInfo,
    EnvironmentInfo,
    EnvironmentPage,
    ErrorResponse,
    EvalInfo,
    ListQuery,
    Me,
    TokenCreated,
    TokenInfo,
    VersionInfo,
    attachments_path,
)


class HubAPIError(Exception):
    """An error answer from the hub: ``code`` is stable, ``message`` says what to do."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{message} [{code}]")
        self.status, self.code, self.message = status, code, message


def hub_url(url: str) -> str:
    """``url`` as a hub's base URL (http or https, a host, maybe a path), or a clear error:
    credentials, a query or a fragment in it would change which server a request reaches."""
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError) as exc:
        raise HubAPIError(0, "bad_hub_url", f"{url!r} is not a hub URL: {exc}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise HubAPIError(0, "bad_hub_url", f"{url!r} is not a hub URL: use http(s)://HOST[:PORT]")
    if parsed.userinfo or parsed.query or parsed.fragment:
        raise HubAPIError(
            0,
            "bad_hub_url",
            f"{url!r} is not a hub URL: it may not carry credentials, a query or a fragment",
        )
    return str(parsed).rstrip("/")


class HubClient:
    def __init__(self, url: str, token: str | None = None, timeout: float = 60.0) -> None:
        self.url = hub_url(url)
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise HubAPIError(
                0,
                "unreachable",
                f"cannot reach the hub at {self.url} ({type(exc).__name__}: {exc}); check PRIME_HUB_URL or `prime login --url`",
            ) from exc
        if resp.status_code >= 400:
            try:
                error = ErrorResponse.model_validate_json(resp.content).error
            except ValueError:  # not the hub's error shape (pydantic's ValidationError too)
                raise HubAPIError(
                    resp.status_code, "http_error", f"HTTP {resp.status_code}: {resp.text[:200]}"
                ) from None
            raise HubAPIError(resp.status_code, error.code, error.message)
        if resp.status_code == 204:
            return None
        try:
            return resp.json()
        except ValueError:
            raise HubAPIError(
                resp.status_code,
                "not_a_hub",
                f"{self.url} answered {method} {path} with something other than the hub's API "
                f"({resp.headers.get('content-type', 'no content type')}); check the hub URL",
            ) from None

    def me(self) -> Me:
        return Me.model_validate(self._call("GET", "/api/v1/me"))

    def create_token(
        self, name: str, scopes: Sequence[str], expires_in_days: int | None = None
    ) -> TokenCreated:
        body = {"name": name, "scopes": list(scopes), "expires_in_days": expires_in_days}
        return TokenCreated.model_validate(self._call("POST", "/api/v1/tokens", json=body))

    def list_tokens(self) -> list[TokenInfo]:
        return [TokenInfo.model_validate(t) for t in self._call("GET", "/api/v1/tokens")]

    def revoke_token(self, token_id: int) -> None:
        self._call("DELETE", f"/api/v1/tokens/{token_id}")

    def create_user(self, name: str, is_admin: bool = False) -> TokenCreated:
        return TokenCreated.model_validate(
            self._call("POST", "/api/v1/users", json={"name": name, "is_admin": is_admin})
        )

    def delete_account(self, user: str | None = None) -> AccountDeleted:
        """Delete the caller's account, or (an admin) ``user``'s."""
        path = "/api/v1/me" if user is None else f"/api/v1/users/{quote(user, safe='')}"
        return AccountDeleted.model_validate(self._call("DELETE", path))

    def create_team(self, name: str) -> None:
        self._call("POST", "/api/v1/teams", json={"name": name})

    def add_team_member(self, team: str, user: str) -> None:
        self._call("POST", f"/api/v1/teams/{team}/members", json={"user": user})

    def list_environments(
        self,
        q: str | None = None,
        owner: str | None = None,
        tag: str | None = None,
        sort: str = "updated",
        page: int = 1,
        per_page: int = 20,
    ) -> EnvironmentPage:
        query = ListQuery(q=q, owner=owner, tag=tag, sort=sort, page=page, per_page=per_page)
        params = query.params()
        return EnvironmentPage.model_validate(
            self._call("GET", "/api/v1/environments", params=params)
        )

    def environment(self, owner: str, name: str) -> EnvironmentInfo:
        return EnvironmentInfo.model_validate(
            self._call("GET", f"/api/v1/environments/{owner}/{name}")
        )

    def versions(self, owner: str, name: str) -> list[VersionInfo]:
        return [
            VersionInfo.model_validate(v)
            for v in self._call("GET", f"/api/v1/environments/{owner}/{name}/versions")
        ]

    def version(self, owner: str, name: str, version: str = "latest") -> VersionInfo:
        return VersionInfo.model_validate(
            self._call("GET", f"/api/v1/environments/{owner}/{name}/versions/{version}")
        )

    def publish(
        self,
        owner: str,
        name: str,
        wheel: Path,
        sdist: Path | None,
        *,
        visibility: str | None = None,
        readme: str | None = None,
        description: str | None = None,
        tags: list[str] | None = None,
    ) -> VersionInfo:
        files = {"wheel": (wheel.name, wheel.read_bytes(), "application/octet-stream")}
        if sdist is not None:
            files["sdist"] = (sdist.name, sdist.read_bytes(), "application/octet-stream")
        data = {"tags": json.dumps(tags or [])}
        if visibility is not None:  # absent: the hub keeps the environment's visibility
            data["visibility"] = visibility
        if readme is not None:
            data["readme"] = readme
        if description is not None:
            data["description"] = description
        return VersionInfo.model_validate(
            self._call(
                "POST", f"/api/v1/environments/{owner}/{name}/versions", files=files, data=data
            )
        )

    def yank(
        self, owner: str, name: str, version: str, reason: str | None = None, undo: bool = False
    ) -> VersionInfo:
        return VersionInfo.model_validate(
            self._call(
                "POST",
                f"/api/v1/environments/{owner}/{name}/versions/{version}/yank",
                json={"reason": reason, "undo": undo},
            )
        )

    def delete(self, owner: str, name: str) -> None:
        self._call("DELETE", f"/api/v1/environments/{owner}/{name}")

    def delete_version(self, owner: str, name: str, version: str) -> None:
        self._call("DELETE", f"/api/v1/environments/{owner}/{name}/versions/{version}")

    def is_own_origin(self, url: str) -> bool:
        """Whether ``url`` (absolute, or relative to the hub) is on the hub's own origin."""
        target = self.http.base_url.join(url)
        hub = self.http.base_url
        return (target.scheme, target.host, target.port) == (hub.scheme, hub.host, hub.port)

    def download(self, url: str) -> bytes:
        """GET a file the hub linked to; the token goes only to the hub's own origin (a link
        elsewhere, say a mirror, is fetched without it; its sha256 is checked by the caller)."""
        try:
            if self.is_own_origin(url):
                resp = self.http.get(url)
            else:
                resp = httpx.get(url, timeout=self.http.timeout, follow_redirects=False)
        except httpx.HTTPError as exc:
            raise HubAPIError(0, "unreachable", f"download of {url} failed: {exc}") from exc
        if resp.status_code >= 400:
            raise HubAPIError(
                resp.status_code,
                "download_failed",
                f"download of {url} failed with HTTP {resp.status_code}",
            )
        return resp.content

    def push_eval(
        self, owner: str, name: str, version: str, metadata: bytes, results: bytes
    ) -> EvalInfo:
        files = {
            "metadata": ("metadata.json", metadata, "application/json"),
            "results": ("results.jsonl", results, "application/jsonl"),
        }
        return EvalInfo.model_validate(
            self._call("POST", attachments_path(owner, name, version, "evals"), files=files)
        )

    def push_dataset(
        self, owner: str, name: str, version: str, card: bytes, data: bytes
    ) -> DatasetInfo:
        files = {
            "card": ("vf_data.json", card, "application/json"),
            "data": ("data.parquet", data, "application/octet-stream"),
        }
        path = attachments_path(owner, name, version, "datasets")
        return DatasetInfo.model_validate(self._call("POST", path, files=files))

    def datasets(self, owner: str, name: str, version: str) -> list[DatasetInfo]:
        path = attachments_path(owner, name, version, "datasets")
        return [DatasetInfo.model_validate(d) for d in self._call("GET", path)]

    def evals(self, owner: str, name: str, version: str) -> list[EvalInfo]:
        return [
            EvalInfo.model_validate(e)
            for e in self._call("GET", attachments_path(owner, name, version, "evals"))
        ]
