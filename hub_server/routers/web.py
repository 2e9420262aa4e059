"""The hub's web pages: search, environment pages, owner pages, and a sign-in for private ones.

Server-rendered Jinja2 (autoescaped) with no JavaScript and nothing loaded from elsewhere (a
Content-Security-Policy of ``default-src 'none'`` says so), never framed by another page
(``frame-ancestors 'none'``, ``X-Frame-Options: DENY``). READMEs are Markdown rendered by
markdown-it-py with raw HTML off and links limited to http(s), mailto and relative ones.

Sign-in exchanges an API token for a session cookie (HttpOnly, SameSite=Strict, stored hashed,
tied to the token so revoking it ends the session; ``Secure`` and ``__Host-``-prefixed when the
hub is reached over TLS, directly or through a trusted proxy). Forms are protected twice: a POST
must carry an ``Origin`` (or, failing that, ``Referer``) of this hub itself (``null`` and other
ports are other origins), and a CSRF token. Signed in, the token is derived from the session
(a page on another port of the same host can plant cookies, but cannot read or derive this);
the sign-in form's token is a double-submit cookie, ``__Host-`` under TLS.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markdown_it import MarkdownIt
from starlette.concurrency import run_in_threadpool

from hub_protocol.wire import SORTS
from hub_server.db.clock import now
from hub_server.db.rows import EnvironmentRow
from hub_server.errors import HubError
from hub_server.presenters.templates import templates
from hub_server.presenters.views import Views, eval_view
from hub_server.routers.deps import HubDep, ViewsDep
from hub_server.routers.environments import environment_page
from hub_server.services.auth import Principal
from hub_server.services.hub import Hub, page_key
from hub_server.services.names import is_name

router = APIRouter(include_in_schema=False)
SESSION_DAYS = 7
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
_SAFE_SCHEMES = ("http", "https", "mailto", "")


class _SafeLinkMarkdown(MarkdownIt):
    """CommonMark whose links keep only the safe schemes (no ``javascript:``, no ``data:``)."""

    def validateLink(self, url: str) -> bool:
        return urlsplit(url.strip()).scheme.lower() in _SAFE_SCHEMES


_markdown = _SafeLinkMarkdown("commonmark", {"html": False}).enable("table")


def render_readme(text: str | None) -> str:
    """README Markdown as HTML: raw HTML escaped, only safe link schemes kept."""
    return _markdown.render(text or "")


def secure(request: Request) -> bool:
    return request.url.scheme == "https"


def cookie_name(request: Request, base: str) -> str:
    """``__Host-`` cookies can only be set over TLS, for this exact host, by this host."""
    return f"__Host-{base}" if secure(request) else base


def session_of(request: Request) -> str | None:
    return request.cookies.get(cookie_name(request, "vfh_session"))


def session_user(request: Request, hub: Hub) -> Principal | None:
    return hub.auth.from_session(session_of(request))


def session_csrf(session: str) -> str:
    return hashlib.sha256(b"csrf\0" + session.encode()).hexdigest()


def page(
    request: Request,
    template: str,
    user: Principal | None,
    status: int = 200,
    body: str | None = None,
    **context: Any,
) -> HTMLResponse:
    """``template`` rendered for ``user``, with the CSRF token its forms carry; ``body``: the
    page already rendered for an anonymous viewer (``anonymous_body``)."""
    session = session_of(request) if user else None
    login_cookie = cookie_name(request, "vfh_login")
    nonce = request.cookies.get(login_cookie) or secrets.token_urlsafe(24)
    csrf = session_csrf(session) if session else nonce
    if body is None:
        body = templates.get_template(template).render(user=user, csrf=csrf, **context)
    response = HTMLResponse(body, status_code=status)
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    if not session and login_cookie not in request.cookies:
        response.set_cookie(
            login_cookie, nonce, httponly=True, samesite="strict", path="/", secure=secure(request)
        )
    return response


def check_form(request: Request, csrf: str) -> None:
    """The form was posted by one of this hub's own pages (origin, then token). The browser
    sets ``Origin`` and ``Host``; a page elsewhere (another port included) cannot make them agree."""
    origin = request.headers.get("origin") or _referer_origin(request.headers.get("referer"))
    own = f"{request.url.scheme}://{request.url.netloc}"
    if origin is None or origin == "null" or origin != own:
        raise HubError(
            403, "csrf_failed", "the form was not posted from this hub's own page: reload it"
        )
    session = session_of(request)
    expected = (
        session_csrf(session)
        if session
        else request.cookies.get(cookie_name(request, "vfh_login"), "")
    )
    if not expected or not hmac.compare_digest(expected.encode(), csrf.encode()):
        raise HubError(403, "csrf_failed", "the form is stale or not from this hub: reload it")


def _referer_origin(referer: str | None) -> str | None:
    if not referer:
        return None
    parts = urlsplit(referer)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None


@router.get("/", response_class=HTMLResponse)
def home(
    request: Request,
    hub: HubDep,
    q: str | None = None,
    tag: str | None = None,
    owner: str | None = None,
    sort: str = "updated",
    page_number: int = 1,
) -> HTMLResponse:
    user = session_user(request, hub)
    sort = sort if sort in SORTS else "updated"
    listing = environment_page(
        hub, user, q=(q or "")[:200], owner=owner, tag=tag, sort=sort, page=page_number, per_page=25
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
        sorts=tuple(SORTS),
    )


@router.get("/u/{owner}", response_class=HTMLResponse)
def owner_page(request: Request, owner: str, hub: HubDep) -> HTMLResponse:
    user = session_user(request, hub)
    if not is_name(owner):  # no owner has such a name
        return page(request, "missing.html", user, status=404, what=owner)
    listing = environment_page(hub, user, owner=owner, per_page=100)
    return page(request, "owner.html", user, owner=owner, listing=listing)


@router.get("/e/{owner}/{name}", response_class=HTMLResponse)
async def environment(
    request: Request, owner: str, name: str, hub: HubDep, views: ViewsDep
) -> HTMLResponse:
    """Served by ``PageFastPath`` in a running hub; this route documents it (and serves it
    where the middleware is not installed)."""
    return await environment_response(request, hub, views, owner, name)


async def environment_response(
    request: Request, hub: Hub, views: Views, owner: str, name: str
) -> HTMLResponse:
    """The viewer and the visibility check, every request; the content, which is the same for
    every viewer who may read it, from the cache while nothing it shows has changed (on the
    loop: no thread hop on SQLite, one on PostgreSQL), made again when it has (``page_for``)."""
    known = None if session_of(request) else await known_page_key(hub, owner, name)
    content = None
    if known is not None:  # anonymous, and the row read at the current generation
        user, env, key = known
    else:
        user, env, key, content = await hub.read(page_for, request, hub, views, owner, name)
    if env is None or key is None:
        return page(request, "missing.html", user, status=404, what=f"{owner}/{name}")
    content = content or hub.cached_content_hit(key)
    if content is None:
        content = await run_in_threadpool(
            hub.cached_content, key, lambda: environment_content(hub, views, env)
        )
    if user is None:  # every anonymous viewer is shown the same page: made once per change
        body = hub.cached_content((*key, "anonymous"), lambda: anonymous_body(env, content))
        return page(request, "environment.html", None, body=body)
    return page(request, "environment.html", user, env=env, content=content)


def anonymous_body(env: EnvironmentRow, content: str) -> str:
    """An environment's page as every anonymous viewer sees it: the frame without a session
    names no one and carries no CSRF token (only a signed-in frame's sign-out form does)."""
    return templates.get_template("environment.html").render(
        user=None, csrf="", env=env, content=content
    )


def page_for(
    request: Request, hub: Hub, views: Views, owner: str, name: str
) -> tuple[Principal | None, EnvironmentRow | None, tuple[Any, ...] | None, str | None]:
    """``page_key_for`` (``Hub.read``: in a worker thread on PostgreSQL, on the loop on
    SQLite) and, in that worker thread, the page's content, cached or made there: one thread
    hop for both, not two. On SQLite None: a page not cached yet is made in a worker thread
    (made on the loop, with no GIL hand-offs, the p99 of new pages at c=32 on 2 shared cores
    was worse in each of two same-sitting runs at 10,000 environments: 117 -> 521 ms and
    598 -> 1683 ms, the loop's one thread getting less of a loaded machine than several)."""
    user, env, key = page_key_for(request, hub, owner, name)
    if env is None or key is None or hub.database.dialect == "sqlite":
        return user, env, key, None
    return user, env, key, hub.cached_content(key, lambda: environment_content(hub, views, env))


class PageFastPath:
    """ASGI: ``GET /e/OWNER/NAME``, an environment's page, answered without the framework's
    routing and dependency solving (which cost more than a cached page itself);
    the page and its checks are ``environment_response``, the same as the route's."""

    def __init__(self, app: Any, hub: Hub, views: Views) -> None:
        self.app, self.hub, self.views = app, hub, views

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        parts = scope["path"].split("/") if scope["type"] == "http" else []
        if scope.get("method") != "GET" or len(parts) != 4 or parts[1] != "e" or not all(parts[2:]):
            return await self.app(scope, receive, send)
        request = Request(scope, receive)
        response = await environment_response(request, self.hub, self.views, parts[2], parts[3])
        await response(scope, receive, send)


def page_key_for(
    request: Request, hub: Hub, owner: str, name: str
) -> tuple[Principal | None, EnvironmentRow | None, tuple[Any, ...] | None]:
    """Who is asking, the environment if they may read it, and the key of its content."""
    user = session_user(request, hub)
    try:
        env, evals_mark = hub.environment_for_page(owner, name, user)
    except HubError:
        return user, None, None
    return user, env, page_key(env, evals_mark)


async def known_page_key(
    hub: Hub, owner: str, name: str
) -> tuple[None, EnvironmentRow | None, tuple[Any, ...] | None] | None:
    """``page_key_for`` for an anonymous viewer from the rows kept at the current generation
    (``Hub.known_for_page``), or None where a read of the row is needed."""
    try:
        found = await hub.known_for_page(owner, name, None)
    except HubError:
        return None, None, None
    return None if found is None else (None, found[0], page_key(*found))


def environment_content(hub: Hub, views: Views, env: EnvironmentRow) -> str:
    """An environment page's content: its versions with their files and evals, its README."""
    read = hub.pages.rows(env.id)  # one connection
    rows = read.versions
    versions = [views.version(env, v, read.files[v.id]) for v in reversed(rows)]  # newest first
    by_id = {v.id: v.version for v in rows}
    evals: dict[str, list[dict[str, Any]]] = {v.version: [] for v in rows}
    for row in read.evals:
        evals[by_id[row.version_id]].append(eval_view(row))
    return templates.get_template("environment_content.html").render(
        env=env,
        versions=versions,
        evals=evals,
        readme=render_readme(env.readme),
        tags=json.loads(env.tags),
        latest=env.latest_version,
    )


def local_path(target: str) -> str:
    """``target`` if it is a path on this hub (where sign-in may send the browser next), else
    ``""``: never another origin (``//host``, ``/\\host``, ``https:``), never a control character."""
    if (
        len(target) > 2000
        or not target.startswith("/")
        or target[1:2] in ("/", "\\")
        or any(c < " " or c == "\x7f" for c in target)
    ):
        return ""
    parts = urlsplit(target)
    return target if not parts.scheme and not parts.netloc else ""


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, hub: HubDep, next: str = "") -> HTMLResponse:
    return page(
        request, "login.html", session_user(request, hub), error=None, next=local_path(next)
    )


@router.post("/login")
def login(
    request: Request,
    hub: HubDep,
    token: str = Form(...),
    csrf: str = Form(...),
    next: str = Form(""),
) -> Response:
    check_form(request, csrf)
    try:
        principal = hub.auth.from_token(token.strip())
    except HubError:
        principal = None
    if principal is None:
        return page(
            request,
            "login.html",
            None,
            status=401,
            error="That token was not accepted (mistyped, revoked or expired). Paste a current "
            "API token; the hub's admin can give you one if you have none.",
            next=local_path(next),
        )
    session = secrets.token_urlsafe(32)
    hub.accounts.create_session(session, principal.token_id, now(timedelta(days=SESSION_DAYS)))
    response = RedirectResponse(local_path(next) or "/", status_code=303)
    response.set_cookie(
        cookie_name(request, "vfh_session"),
        session,
        httponly=True,
        samesite="strict",
        path="/",
        max_age=SESSION_DAYS * 86400,
        secure=secure(request),
    )
    return response


@router.post("/logout")
def logout(request: Request, hub: HubDep, csrf: str = Form(...)) -> Response:
    check_form(request, csrf)
    session = session_of(request)
    if session:
        hub.accounts.delete_session(session)
    response = RedirectResponse("/", status_code=303)
    response.delete_cookie(
        cookie_name(request, "vfh_session"),
        path="/",
        secure=secure(request),
        httponly=True,
        samesite="strict",
    )
    return response
