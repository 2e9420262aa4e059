"""The web addresses Prime's official CLI prints, landing on this hub's pages.

The official client builds links from its ``frontend_url`` (``prime config set-frontend-url``,
this hub's address): ``/dashboard/environments/OWNER/NAME`` after a push,
``/dashboard/evaluations/ID`` after an eval push, and ``/dashboard/tokens/challenge?code=CODE``
for ``prime login``. The first two redirect to the hub's own pages; the third is the page where a
signed-in user approves or denies a login (``hub_server.services.login``), a form protected like
the other web forms (``web.check_form``: this hub's origin and the session's CSRF token).
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from hub_server.errors import HubError
from hub_server.routers.deps import HubDep
from hub_server.routers.web import check_form, page, session_user
from hub_server.services import login, official_evals
from hub_server.services.names import is_name

router = APIRouter(include_in_schema=False)
CHALLENGE = "/dashboard/tokens/challenge"


@router.get("/dashboard/environments/{owner}/{name}")
def environment(owner: str, name: str) -> Response:
    """The environment's page (which answers a private one as missing to everyone else)."""
    if not (is_name(owner) and is_name(name)):
        return RedirectResponse("/", status_code=302)
    return RedirectResponse(f"/e/{quote(owner)}/{quote(name)}", status_code=302)


@router.get("/dashboard/evaluations/{eval_id}", response_class=HTMLResponse)
def evaluation(request: Request, eval_id: str, hub: HubDep) -> Response:
    """The eval, by its id or the ``evaluation_id`` ``prime eval push`` printed, on the page of
    the environment it is attached to, for whoever may read it."""
    user = session_user(request, hub)
    try:
        row = official_evals.readable(hub, user, eval_id)
    except HubError:
        return page(request, "missing.html", user, status=404, what=f"evaluation {eval_id[:64]}")
    return RedirectResponse(f"/e/{quote(row.owner)}/{quote(row.name)}#eval-{row.id}", 302)


@router.get(CHALLENGE, response_class=HTMLResponse)
def challenge(request: Request, hub: HubDep, code: str = "") -> HTMLResponse:
    """Signed out: a link to sign in and come back. Signed in: the login waiting under
    ``code`` (when and from where it was asked), to approve or deny."""
    user = session_user(request, hub)
    code = login.normalize_code(code) or code[:64]
    here = f"{CHALLENGE}?{urlencode({'code': code})}" if code else CHALLENGE
    waiting = login.pending(hub, code) if user and code else None
    return page(
        request,
        "challenge.html",
        user,
        status=404 if user and code and waiting is None else 200,
        code=code,
        waiting=waiting,
        scopes=sorted(login.token_scopes(user)) if user else [],
        expires=user.expires_at if user else None,
        done=None,
        error=None,
        sign_in=f"/login?{urlencode({'next': here})}",
    )


@router.post(CHALLENGE, response_class=HTMLResponse)
def decide(
    request: Request,
    hub: HubDep,
    code: str = Form(...),
    decision: str = Form(...),
    csrf: str = Form(...),
) -> HTMLResponse:
    check_form(request, csrf)
    user = session_user(request, hub)
    if user is None:
        raise HubError(403, "sign_in_required", "sign in to the hub to approve a login")
    if decision not in ("approve", "deny"):
        raise HubError(400, "invalid_decision", "decision must be 'approve' or 'deny'")
    status, error = 200, None
    try:
        if decision == "approve":
            decided = login.approve(hub, user, code)
        else:
            decided = login.deny(hub, user, code)
    except HubError as refused:  # a token that may not mint one (read-only)
        decided, status, error = False, refused.status, refused.message
    if not decided and error is None:
        status = 404  # the page says the code names no waiting login
    return page(
        request,
        "challenge.html",
        user,
        status=status,
        code=login.normalize_code(code) or code[:64],
        waiting=None if decided else login.pending(hub, code),
        scopes=sorted(login.token_scopes(user)),
        expires=user.expires_at,
        done=decision if decided else None,
        error=error,
        sign_in="/login",
    )
