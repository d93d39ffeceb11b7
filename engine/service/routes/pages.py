"""The status pages (:mod:`engine.service.page`): HTML for people, signed in by a cookie that is
good for reading only. They are not the API, so ``/openapi.json`` leaves them out."""

from __future__ import annotations

from html import escape
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from engine.flow.limits import MAX_GROUP, MAX_NAME
from engine.service.page import COOKIE, flow_html, named, overview, page, signed_in
from engine.service.routes.deps import Served

router = APIRouter(include_in_schema=False)


@router.get("/login", response_class=HTMLResponse)
def login_form(failed: str = "") -> str:
    said = '<p class="status FAILED" id="refused">That token is not valid.</p>' if failed else ""
    form = (
        f'<form method="post" action="/login">{said}<label>Token <input type="password" name="token" id="token" '
        'size="60" autofocus></label> <button type="submit" id="login">Sign in</button></form>'
    )
    return page("Sign in", form, refresh=False)


@router.post("/login")
async def login(request: Request, service: Served) -> Response:
    token = (parse_qs((await request.body()).decode(errors="replace")).get("token") or [""])[0].strip()
    if not token or await run_in_threadpool(service.users.authenticate, token) is None:
        return RedirectResponse("/login?failed=1", status_code=303)
    answer = RedirectResponse("/", status_code=303)
    answer.set_cookie(COOKIE, token, httponly=True, samesite="strict")
    return answer


@router.get("/logout")
def logout() -> Response:
    answer = RedirectResponse("/login", status_code=303)
    answer.delete_cookie(COOKIE)
    return answer


@router.get("/", response_class=HTMLResponse)
def overview_page(request: Request, service: Served) -> Response:
    user = signed_in(request, service)
    if user is None:
        return RedirectResponse("/login", status_code=303)
    return HTMLResponse(page("Flows", overview(service, user)))


@router.get("/flows/{group}/{name}", response_class=HTMLResponse)
def flow_page(request: Request, service: Served, group: str, name: str) -> Response:
    user = signed_in(request, service)
    if user is None:
        return RedirectResponse("/login", status_code=303)
    flow = service.flows.get(group, name) if named(group, MAX_GROUP) and named(name, MAX_NAME) else None
    if flow is None:
        return HTMLResponse(page("Not found", f"<p>No flow {escape(group)}/{escape(name)}.</p>"), status_code=404)
    return HTMLResponse(page(f"{group}/{name}", flow_html(service, flow.describe())))
