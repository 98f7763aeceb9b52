"""The pages: the lab, a run, an experiment, a monitor, the sign-in form, and the files they load.

Store work is blocking, so these are plain functions that FastAPI runs in its thread pool (the sign-in's POST
only reads its form). Left out of the OpenAPI description: they are for a browser.
"""

from __future__ import annotations

import gzip
import time
from typing import Annotated, Optional
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ..report.template import DRAW_PLOTS, STYLE
from . import boards, views
from .access import COOKIE
from .shared import HERE, Shared

STATIC = {"serve.js": "text/javascript", "serve.css": "text/css"}
STALE = "X-Rtscope-Stale"   # a response made from an earlier state of the store than the request saw

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def lab_page(srv: Shared):
    def make():
        rows = boards.page_rows(srv.lab, time.time())    # first: it reads the new runs the latest results show
        runs = srv.latest_runs()
        latest, common = views.latest_results(runs, [srv.stats_doc(r) for r in runs])
        return srv.page("lab.html", title="rtscope lab", targets=srv.targets(), boards=rows,
                        experiments=views.experiment_rows(srv.store), latest=latest, common=common).body
    # remade when the store changes or a board's bound is fitted; while a burst of intervals is being read,
    # the page before (the page's script asks again)
    body, stale = srv.lab_page.get((srv.watch.fingerprint(), srv.lab.fitted), make)
    return HTMLResponse(body, headers={STALE: "1"} if stale else None)


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(run_id: int, srv: Shared):
    def make():
        run = views.get_run(srv.store, run_id)
        return srv.page("run.html", title=f"run {run_id}: {run.label}",
                        **views.run_page(srv.store, run, srv.run_doc(run_id)[0])).body
    return HTMLResponse(srv.run_pages.get(run_id, make))


@router.get("/experiments/{exp_id}", response_class=HTMLResponse)
def experiment_page(exp_id: int, srv: Shared, baseline: Annotated[Optional[list[str]], Query()] = None):
    chosen = [b for b in baseline or [] if b.strip()]

    def make():
        ctx = views.experiment_page(srv.store, exp_id, chosen or None)
        return srv.page("experiment.html", title=f"experiment {exp_id}: {ctx['exp'].name}", **ctx).body
    return HTMLResponse(srv.current(("experiment", exp_id, tuple(chosen)), make))


@router.get("/monitors/{exp_id}", response_class=HTMLResponse)
def monitor_page(exp_id: int, srv: Shared):
    def make():
        ctx = views.monitor_page(srv.store, exp_id)
        return srv.page("monitor.html", title=f"monitoring {exp_id} of {ctx['target']}", **ctx).body
    return HTMLResponse(srv.current(("monitor", exp_id), make))


@router.get("/static/plotly.js")
def plotly_js(request: Request, srv: Shared):
    headers = {"Cache-Control": "public, max-age=86400"}
    if "gzip" in request.headers.get("accept-encoding", ""):
        return Response(srv.plotly_gz, media_type="text/javascript",
                        headers={**headers, "Content-Encoding": "gzip", "Vary": "Accept-Encoding"})
    return Response(gzip.decompress(srv.plotly_gz), media_type="text/javascript", headers=headers)


@router.get("/static/{name}")
def static(name: str):
    if name not in STATIC:
        raise views.NotFound(f"no such file: /static/{name}")
    shared = DRAW_PLOTS if name.endswith(".js") else STYLE     # the report's, then the server's own
    return Response(shared + (HERE / "static" / name).read_text(), media_type=STATIC[name],
                    headers={"Cache-Control": "no-cache"})


@router.get("/login", response_class=HTMLResponse)
def login_form(srv: Shared, next: str = "/"):
    return srv.page("login.html", title="rtscope: sign in", next=safe_next(next), failed=False)


@router.post("/login")
async def login(request: Request, srv: Shared):
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    target = safe_next((form.get("next") or ["/"])[0])
    session = srv.access.session_for((form.get("token") or [""])[0])
    if session is None:
        return srv.page("login.html", status=401, title="rtscope: sign in", next=target, failed=True)
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(COOKIE, session, httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return response


def safe_next(target: str) -> str:
    """Only a path of this server (no scheme, no other host) to go on to after signing in."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"
