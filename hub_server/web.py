"""The hub's web pages: search, environment pages, owner pages, and a login for private ones.

Server-rendered Jinja2 (autoescaped) with no JavaScript needed and nothing loaded from elsewhere
(a Content-Security-Policy of ``default-src 'none'`` says so to the browser). READMEs are
Markdown rendered by markdown-it-py with raw HTML off (any HTML in a README is shown as text)
and links limited to http(s), mailto and relative ones. Private environments appear only to a
session of a user who may read them: ``/login`` exchanges an API token for a session cookie
(HttpOnly, SameSite=Strict, stored hashed, tied to the token so revoking the token ends it);
every form carries a CSRF token that must match its cookie (double submit) and a same-origin
``Origin`` when the browser sends one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jinja2
from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markdown_it import MarkdownIt

SESSION_COOKIE = "vfh_session"
CSRF_COOKIE = "vfh_csrf"
SESSION_DAYS = 7
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'"

_templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
_SAFE_SCHEMES = ("http", "https", "mailto", "")


_markdown = MarkdownIt("commonmark", {"html": False}).enable("table")
_markdown.validateLink = lambda url: urlsplit(url.strip()).scheme.lower() in _SAFE_SCHEMES


def render_readme(text: str | None) -> str:
    """README Markdown as HTML: raw HTML escaped, only safe link schemes kept."""
    return _markdown.render(text or "")


def _hash(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def add_web_routes(app: FastAPI, hub: Any, helpers: dict[str, Any]) -> None:
    """``helpers``: the API's own ``summary``, ``version_info`` and ``histogram`` functions."""
    from hub_server.app import ENV_SORTS, HubError, Principal, now

    def session_user(request: Request) -> Principal | None:
        session = request.cookies.get(SESSION_COOKIE)
        if not session:
            return None
        row = (
            hub.store.read()
            .execute(
                "SELECT u.id, u.name, u.is_admin, t.id AS token_id, t.scopes, t.expires_at, "
                "t.revoked_at, s.expires_at AS session_expires FROM sessions s "
                "JOIN tokens t ON t.id=s.token_id JOIN users u ON u.id=t.user_id "
                "WHERE s.session_hash=?",
                (_hash(session),),
            )
            .fetchone()
        )
        current = now()
        if (
            row is None
            or row["revoked_at"] is not None
            or (row["expires_at"] is not None and row["expires_at"] <= current)
            or row["session_expires"] <= current
        ):
            return None
        scopes = set(row["scopes"].split(","))
        return Principal(
            row["id"],
            row["name"],
            bool(row["is_admin"]) and "admin" in scopes,
            scopes,
            row["token_id"],
        )

    def page(
        request: Request,
        template: str,
        user: Principal | None,
        status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        """``template`` rendered for ``user`` (the request's session, looked up once)."""
        csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)
        body = _templates.get_template(template).render(user=user, csrf=csrf, **context)
        response = HTMLResponse(body, status_code=status)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        if CSRF_COOKIE not in request.cookies:
            response.set_cookie(CSRF_COOKIE, csrf, httponly=True, samesite="strict", path="/")
        return response

    def check_form(request: Request, csrf: str) -> None:
        cookie = request.cookies.get(CSRF_COOKIE, "")
        if not cookie or not hmac.compare_digest(cookie.encode(), csrf.encode()):
            raise HubError(403, "csrf_failed", "the form is stale or not from this hub: reload it")
        origin = request.headers.get("origin")
        if origin and origin != "null":
            expected = f"{request.url.scheme}://{request.url.netloc}"
            if origin != expected:
                raise HubError(403, "csrf_failed", "the form was posted from another site")

    @app.get("/", response_class=HTMLResponse)
    def home(
        request: Request,
        q: str | None = None,
        tag: str | None = None,
        owner: str | None = None,
        sort: str = "updated",
        page_number: int = 1,
    ) -> HTMLResponse:
        user = session_user(request)
        listing = helpers["list_environments"](
            user,
            q=q,
            owner=owner,
            tag=tag,
            sort=sort if sort in ENV_SORTS else "updated",
            page=page_number,
            per_page=25,
        )
        return page(
            request,
            "index.html",
            user,
            listing=listing,
            q=q or "",
            tag=tag or "",
            owner=owner or "",
            sort=sort,
            sorts=ENV_SORTS,
        )

    @app.get("/u/{owner}", response_class=HTMLResponse)
    def owner_page(request: Request, owner: str) -> HTMLResponse:
        user = session_user(request)
        listing = helpers["list_environments"](user, owner=owner, per_page=100)
        return page(request, "owner.html", user, owner=owner, listing=listing)

    @app.get("/e/{owner}/{name}", response_class=HTMLResponse)
    def environment_page(request: Request, owner: str, name: str) -> HTMLResponse:
        user = session_user(request)
        try:
            env = hub.env_row(owner, name, user)
        except HubError:
            return page(request, "missing.html", user, status=404, what=f"{owner}/{name}")
        rows_by_version = hub.version_rows(env["id"])
        versions = [helpers["version_info"](request, env, v) for v in reversed(rows_by_version)]
        evals = {}  # newest version first above; evals by version string
        for v in rows_by_version:
            rows = (
                hub.store.read()
                .execute("SELECT * FROM evals WHERE version_id=? ORDER BY id", (v["id"],))
                .fetchall()
            )
            evals[v["version"]] = [eval_view(r) for r in rows]
        latest = helpers["summary"](env).latest_version
        return page(
            request,
            "environment.html",
            user,
            env=env,
            versions=versions,
            evals=evals,
            readme=render_readme(env["readme"]),
            tags=json.loads(env["tags"]),
            latest=latest,
            base_url=str(request.base_url).rstrip("/"),
        )

    histograms: dict[int, dict[str, Any]] = {}  # attached evals never change: read each once

    def reward_histogram(row: Any) -> dict[str, Any]:
        if row["id"] not in histograms:
            rewards = []
            for line in hub.blobs.get(row["results_blob"]).splitlines():
                try:
                    rewards.append(float(json.loads(line).get("reward") or 0.0))
                except (ValueError, AttributeError):
                    continue
            histograms[row["id"]] = helpers["histogram"](rewards)
        return histograms[row["id"]]

    def eval_view(row: Any) -> dict[str, Any]:
        summary = json.loads(row["summary"])
        return {
            "id": row["id"],
            "model": row["model"],
            "created_at": row["created_at"],
            "uploaded_by": row["uploaded_by"],
            "num_rollouts": row["num_rollouts"],
            "summary": summary,
            "histogram": reward_histogram(row),
        }

    @app.get("/login", response_class=HTMLResponse)
    def login_form(request: Request) -> HTMLResponse:
        return page(request, "login.html", session_user(request), error=None)

    @app.post("/login")
    def login(request: Request, token: str = Form(...), csrf: str = Form(...)) -> Response:
        check_form(request, csrf)
        try:
            principal = hub.principal(token.strip())
        except HubError as exc:
            return page(request, "login.html", None, status=401, error=exc.message)
        if principal is None:
            return page(request, "login.html", None, status=401, error="paste an API token")
        session = secrets.token_urlsafe(32)
        from datetime import UTC, datetime, timedelta

        expires = (datetime.now(UTC) + timedelta(days=SESSION_DAYS)).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ"
        )
        with hub.store.transaction() as db:
            db.execute(
                "INSERT INTO sessions (session_hash, token_id, created_at, expires_at) VALUES (?,?,?,?)",
                (_hash(session), principal.token_id, now(), expires),
            )
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            session,
            httponly=True,
            samesite="strict",
            path="/",
            max_age=SESSION_DAYS * 86400,
            secure=request.url.scheme == "https",
        )
        return response

    @app.post("/logout")
    def logout(request: Request, csrf: str = Form(...)) -> Response:
        check_form(request, csrf)
        session = request.cookies.get(SESSION_COOKIE)
        if session:
            with hub.store.transaction() as db:
                db.execute("DELETE FROM sessions WHERE session_hash=?", (_hash(session),))
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path="/")
        return response
