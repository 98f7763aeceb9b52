"""The ASGI application: pages, the JSON API under /api/, /metrics and the live event stream.

FastAPI (on Starlette, under uvicorn): it validates query and path parameters from their types (a bad one is
a 422 naming it and its valid values) and describes the API as OpenAPI (/openapi.json) from the same code.
Store work is blocking, so the routes are plain functions that FastAPI runs in its thread pool; only the event
stream is a coroutine. No error ever sends a stack trace: the client gets a message (JSON under /api/ and
/metrics, a page elsewhere), the server's log the details.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import threading
import time
from pathlib import Path
from typing import Annotated, Optional
from urllib.parse import quote

import jinja2
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..analysis.compare import ALPHA
from ..analysis.documents import compare_document, comparison_set, explain_document, run_summary, show_document
from ..analysis.select import Selection
from ..errors import RtscopeError, UsageError
from ..report.html import PLOTLY_BUNDLE
from ..report.model import machine_rows
from ..report.template import DRAW_PLOTS, STYLE, TABLES
from ..store import Store, to_jsonable, unreachable
from ..version import __version__
from . import boards, metrics, views
from .access import COOKIE, Access
from .live import POLL_S, Bounded, Refreshed, Watch

log = logging.getLogger("rtscope.serve")
HERE = Path(__file__).parent
API_PREFIXES = ("/api/", "/metrics", "/events", "/openapi.json")
OPEN_PATHS = ("/login", "/static/serve.css", "/static/serve.js")  # the sign-in page and what it needs
STATIC = {"serve.js": "text/javascript", "serve.css": "text/css"}
HEARTBEAT_S = 15
STALE = "X-Rtscope-Stale"   # a response made from an earlier state of the store than the request saw
# What each parameter accepts, for the 422 message (the routes' own constraints say the same to OpenAPI).
VALID = {"limit": "1..1000", "offset": "0 or more", "experiment": "an experiment id", "alpha": "0 < alpha < 1",
         "per_thread": "true or false",
         "run_id": "a run id (see /api/runs)", "exp_id": "an experiment id", "run": "a run id (see /api/runs)",
         "where": "NAME=VALUE"}
# Scripts only from this server (the page's own and plotly's); plotly sets inline styles.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "same-origin"}


def document_text(obj) -> str:
    """A document as the CLI's --json prints it (the same text, without the final newline)."""
    return json.dumps(to_jsonable(obj), indent=2, sort_keys=False)


def wants_json(request: Request) -> bool:
    return request.url.path.startswith(API_PREFIXES)


class Server:
    """The store and what the routes share: the change watch, the caches, the templates and the token check."""

    def __init__(self, store: Store, access: Access):
        self.store, self.access = store, access
        self.watch = Watch(store)
        self.lab = boards.Lab(store)       # the boards of /metrics, each interval's figures computed once
        self.run_docs = Bounded(256)       # run id -> (show document, its text)
        self.run_stats = Bounded(256)      # run id -> its show document without the worst case (no tail fit)
        self.run_pages = Bounded(16)       # run id -> page (a stored run never changes)
        self.run_machines = Bounded(1024)  # run id -> its machine record (each target's newest run's)
        self.exposition = metrics.Exposition()   # /metrics' text, each board's lines made once per its state
        self.by_state = Bounded(32)        # (what, args..., fingerprint) -> page or document (pages < ~1 MB)
        making = threading.Lock()          # the lab page, and the boards as /metrics reads them: made again off
        self.lab_page = Refreshed(making)  # the request when the store changes, one at a time
        self.boards_read = Refreshed(making)
        self.templates = jinja2.Environment(loader=jinja2.ChoiceLoader([
            jinja2.FileSystemLoader(HERE / "templates"), jinja2.DictLoader({"tables.html": TABLES})]), autoescape=True,
                                            undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.templates.globals["machine_rows"] = machine_rows
        self.plotly_gz = PLOTLY_BUNDLE.read_bytes()

    def page(self, name: str, status: int = 200, **context) -> HTMLResponse:
        html = self.templates.get_template(name).render(version=__version__, store=self.store.shown_url,
                                                        token=self.access.required, **context)
        return HTMLResponse(html, status_code=status)

    def run_doc(self, run_id: int) -> tuple[dict, str]:
        def make():
            doc = to_jsonable(show_document(self.store, views.get_run(self.store, run_id)))
            return doc, document_text(doc)
        return self.run_docs.get(run_id, make)

    def stats_doc(self, run) -> dict:
        """A run's show document for a page of many runs: without the worst case, whose tail fit would cost
        each run up to seconds (the run's own page and the API have it)."""
        return self.run_stats.get(run.id, lambda: to_jsonable(show_document(self.store, run, worst_case=False)))

    def targets(self) -> list[views.TargetRow]:
        """Every target that has runs, with its newest run's machine record (read once per run)."""
        newest = self.lab.origins.read().targets
        return views.targets(newest, self.run_machines.get_many([t.run_id for t in newest.values()],
                                                                self.store.machines))

    def latest_runs(self) -> list:
        """The newest stored runs, newest first (each read once: a stored run never changes)."""
        ids = self.store.latest_run_ids(views.LATEST_RESULTS)
        found = self.lab.runs(ids)
        return [found[i] for i in ids if i in found]

    def current(self, key: tuple, make):
        """A value computed from the store as it is now, cached until the store changes."""
        return self.by_state.get((*key, self.watch.fingerprint()), make)


def make_app(store: Store, access: Access) -> FastAPI:
    srv = Server(store, access)
    app = FastAPI(title="rtscope", version=__version__, docs_url=None, redoc_url=None,
                  description="The rtscope store, read-only: runs, experiments, comparisons and targets. "
                              "The documents are those `rtscope show --json` and `rtscope compare --json` print.")
    app.state.server = srv

    # --- access and errors ------------------------------------------------------------------------------
    def refused(request: Request) -> Response | None:
        """The answer to a request without the token (None: let it through)."""
        if request.url.path.startswith(OPEN_PATHS) or access.allows(request.headers.get("authorization"),
                                                                     request.cookies.get(COOKIE)):
            return None
        if wants_json(request):
            return JSONResponse({"detail": "this server needs its token: send the header "
                                           "'Authorization: Bearer TOKEN'"}, status_code=401,
                                headers={"WWW-Authenticate": "Bearer"})
        return RedirectResponse(f"/login?next={quote(str(request.url.path))}", status_code=303)

    def error(request: Request, status: int, message: str) -> Response:
        if wants_json(request):
            return JSONResponse({"detail": message}, status_code=status)
        return srv.page("error.html", status=status, status_code=status, message=message, title=f"error {status}")

    @app.exception_handler(views.NotFound)
    async def not_found(request: Request, exc: views.NotFound):
        return error(request, 404, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        message = f"no such page: {request.url.path}" if exc.status_code == 404 else str(exc.detail)
        return error(request, exc.status_code, message)

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(request: Request, exc: RequestValidationError):
        problems = []
        for e in exc.errors():
            where, *names = [str(x) for x in e.get("loc", ())] or ["request"]
            name = ".".join(n for n in names if not n.isdigit()) or where      # run.0 (a list's item): run
            given = e.get("input")
            shown = f"={given!r}" if isinstance(given, (str, int, float)) else ""
            valid = f" (valid: {VALID[name]})" if name in VALID else ""
            problems.append(f"bad {where} parameter {name}{shown}: {e.get('msg', 'invalid')}{valid}")
        return error(request, 422, "; ".join(problems))

    @app.exception_handler(UsageError)
    async def usage_error(request: Request, exc: UsageError):
        return error(request, 422, str(exc))

    def failure(request: Request, exc: Exception) -> Response:
        if unreachable(exc):
            log.warning("store %s unreachable: %s", store.shown_url, str(exc).splitlines()[0] if str(exc) else exc)
            return error(request, 503, f"the store {store.shown_url} cannot be reached (database server down or "
                                       "connection lost); this works again as soon as it is back")
        if isinstance(exc, RtscopeError):
            return error(request, 500, str(exc))
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return error(request, 500, "internal error: the server's log says more")

    # --- pages ------------------------------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def lab_page():
        def make():
            rows = boards.page_rows(srv.lab, time.time())    # first: it reads the new runs the latest results show
            runs = srv.latest_runs()
            latest, common = views.latest_results(runs, [srv.stats_doc(r) for r in runs])
            return srv.page("lab.html", title="rtscope lab", targets=srv.targets(), boards=rows,
                            experiments=views.experiment_rows(store), latest=latest, common=common).body
        # remade when the store changes or a board's bound is fitted; while a burst of intervals is being read,
        # the page before (the page's script asks again)
        body, stale = srv.lab_page.get((srv.watch.fingerprint(), srv.lab.fitted), make)
        return HTMLResponse(body, headers={STALE: "1"} if stale else None)

    @app.get("/runs/{run_id}", response_class=HTMLResponse, include_in_schema=False)
    def run_page(run_id: int):
        def make():
            run = views.get_run(store, run_id)
            return srv.page("run.html", title=f"run {run_id}: {run.label}",
                            **views.run_page(store, run, srv.run_doc(run_id)[0])).body
        return HTMLResponse(srv.run_pages.get(run_id, make))

    @app.get("/experiments/{exp_id}", response_class=HTMLResponse, include_in_schema=False)
    def experiment_page(exp_id: int, baseline: Annotated[Optional[list[str]], Query()] = None):
        chosen = [b for b in baseline or [] if b.strip()]

        def make():
            ctx = views.experiment_page(store, exp_id, chosen or None)
            return srv.page("experiment.html", title=f"experiment {exp_id}: {ctx['exp'].name}", **ctx).body
        return HTMLResponse(srv.current(("experiment", exp_id, tuple(chosen)), make))

    @app.get("/monitors/{exp_id}", response_class=HTMLResponse, include_in_schema=False)
    def monitor_page(exp_id: int):
        def make():
            ctx = views.monitor_page(store, exp_id)
            return srv.page("monitor.html", title=f"monitoring {exp_id} of {ctx['target']}", **ctx).body
        return HTMLResponse(srv.current(("monitor", exp_id), make))

    @app.get("/static/plotly.js", include_in_schema=False)
    def plotly_js(request: Request):
        headers = {"Cache-Control": "public, max-age=86400"}
        if "gzip" in request.headers.get("accept-encoding", ""):
            return Response(srv.plotly_gz, media_type="text/javascript",
                            headers={**headers, "Content-Encoding": "gzip", "Vary": "Accept-Encoding"})
        return Response(gzip.decompress(srv.plotly_gz), media_type="text/javascript", headers=headers)

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str):
        if name not in STATIC:
            raise views.NotFound(f"no such file: /static/{name}")
        shared = DRAW_PLOTS if name.endswith(".js") else STYLE     # the report's, then the server's own
        return Response(shared + (HERE / "static" / name).read_text(), media_type=STATIC[name],
                        headers={"Cache-Control": "no-cache"})

    @app.get("/login", response_class=HTMLResponse, include_in_schema=False)
    def login_form(next: str = "/"):
        return srv.page("login.html", title="rtscope: sign in", next=safe_next(next), failed=False)

    @app.post("/login", include_in_schema=False)
    async def login(request: Request):
        from urllib.parse import parse_qs
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        target = safe_next((form.get("next") or ["/"])[0])
        session = access.session_for((form.get("token") or [""])[0])
        if session is None:
            return srv.page("login.html", status=401, title="rtscope: sign in", next=target, failed=True)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(COOKIE, session, httponly=True, samesite="strict", secure=request.url.scheme == "https")
        return response

    # --- live -------------------------------------------------------------------------------------------
    @app.get("/events", include_in_schema=False)
    async def events(request: Request):
        """Server-sent events: `change` when a run or an experiment is stored or changes state, `unavailable`
        while the store cannot be reached."""
        async def stream():
            last, quiet = None, 0.0
            yield "retry: 1000\nevent: hello\ndata: {}\n\n"
            while not await request.is_disconnected():
                try:
                    fp, state = await run_in_threadpool(srv.watch.fingerprint), "change"
                except Exception as e:  # noqa: BLE001 - reported to the page, the stream goes on
                    if not unreachable(e):
                        raise
                    fp, state = "unavailable", "unavailable"
                if fp != last and (last is not None or state == "unavailable"):
                    yield f"event: {state}\ndata: {json.dumps({'runs': fp[0]} if state == 'change' else {})}\n\n"
                    quiet = 0.0
                last = fp
                await asyncio.sleep(POLL_S)
                quiet += POLL_S
                if quiet >= HEARTBEAT_S:
                    yield ": still here\n\n"
                    quiet = 0.0
        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    # --- the API ----------------------------------------------------------------------------------------
    def json_text(text: str) -> Response:
        return Response(text, media_type="application/json")

    @app.get("/api/runs", summary="Stored runs, a page at a time (filtered like `rtscope runs`)")
    def api_runs(workload: Annotated[Optional[str], Query(description="Only runs of this workload.")] = None,
                 experiment: Annotated[Optional[int], Query(ge=1, description="Only runs of this experiment id.")]
                 = None,
                 limit: Annotated[int, Query(ge=1, le=1000, description="Runs per page.")] = 100,
                 offset: Annotated[int, Query(ge=0, description="Runs to skip.")] = 0):
        def make():
            found, total = store.run_page(workload=workload, experiment_id=experiment, limit=limit, offset=offset)
            return document_text({"total": total, "limit": limit, "offset": offset,
                                  "runs": [run_summary(r) for r in found]})
        return json_text(srv.current(("runs", workload, experiment, limit, offset), make))

    @app.get("/api/runs/{run_id}", summary="One run: exactly what `rtscope show RUN --json` prints")
    def api_run(run_id: int):
        return json_text(srv.run_doc(run_id)[1])

    @app.get("/api/runs/{run_id}/explain",
             summary="Why the run's worst samples were late: exactly what `rtscope explain RUN --json` prints")
    def api_explain(run_id: int):
        def make():
            doc = explain_document(store, views.get_run(store, run_id))
            if doc is None:
                raise views.NotFound(f"run {run_id} has no explained samples (setting explain, docs/explain.md)")
            return document_text(doc)
        return json_text(srv.current(("explain", run_id), make))

    @app.get("/api/runs/{run_id}/tail",
             summary="The run's worst case with a bound: exactly what `rtscope tail RUN --json` prints")
    def api_run_tail(run_id: int):
        def make():
            from ..analysis.tail import of_run
            return document_text(of_run(store, views.get_run(store, run_id)).to_json())
        return json_text(srv.current(("tail", run_id), make))

    @app.get("/api/experiments/{exp_id}", summary="An experiment: its record, progress and runs")
    def api_experiment(exp_id: int):
        def make():
            exp = views.get_experiment(store, exp_id)
            runs = store.runs(experiment_id=exp_id)
            parsed = exp.spec.get("parsed") or {}
            return document_text({"experiment": {
                "id": exp.id, "name": exp.name, "description": parsed.get("description", ""),
                "tags": parsed.get("tags") or [], "status": exp.status, "created_at": exp.created_at,
                "finished_at": exp.finished_at, "seed": exp.seed, "scale": exp.scale, "planned": len(exp.plan),
                "stored": len(runs), "monitor": (exp.spec_path or "").startswith(views.MONITOR_PREFIX)},
                "runs": [run_summary(r) for r in runs]})
        return json_text(srv.current(("experiment-doc", exp_id), make))

    @app.get("/api/experiments/{exp_id}/compare",
             summary="Each configuration against a baseline: exactly `rtscope compare --experiment ID --json`")
    def api_compare(exp_id: int,
                    baseline: Annotated[Optional[list[str]], Query(
                        description="NAME=VALUE of a setting, parameter, workload, variant or runtime (repeatable),"
                                    " or `defaults`: compare's --baseline")] = None,
                    alpha: Annotated[float, Query(gt=0, lt=1)] = ALPHA, per_thread: bool = False):
        def make():
            views.get_experiment(store, exp_id)
            cs = comparison_set(store, Selection(experiment=str(exp_id)), baseline, alpha=alpha,
                                per_thread=per_thread)
            return document_text(compare_document(store, cs))
        return json_text(srv.current(("compare", exp_id, tuple(baseline or ()), alpha, per_thread),
                                     make))

    @app.get("/api/experiments/{exp_id}/tail",
             summary="One configuration's worst case with a bound: exactly "
                     "`rtscope tail --experiment ID --where NAME=VALUE --run RUN --json`")
    def api_experiment_tail(exp_id: int,
                            where: Annotated[Optional[list[str]], Query(
                                description="NAME=VALUE of a setting, parameter, workload, variant or runtime "
                                            "(repeatable): tail's --where; the selection must leave one "
                                            "configuration")] = None,
                            run: Annotated[Optional[list[int]], Query(
                                description="Only this run id (repeatable): tail's --run")] = None):
        def make():
            from ..analysis.select import select_runs
            from ..analysis.tail import of_runs
            views.get_experiment(store, exp_id)
            sel = Selection.from_cli(str(exp_id), where=where, run_ids=run)
            return document_text(of_runs(store, select_runs(store, sel)).to_json())
        return json_text(srv.current(("experiment-tail", exp_id, tuple(where or ()), tuple(run or ())), make))

    @app.get("/api/targets", summary="Every target that has runs: kind, description, runs, last seen, machine")
    def api_targets():
        return json_text(srv.current(("targets",), lambda: document_text([t.to_json() for t in srv.targets()])))

    def exposition(gzipped: bool, wait: bool) -> bytes | None:
        """/metrics' text (without `wait`: None unless the fingerprint and the boards' reading are at hand)."""
        def read():
            snap = metrics.read(srv.lab)
            srv.exposition.text(snap, gzipped=True)    # its text made here too, off the scrape
            return snap
        fingerprint = srv.watch.fingerprint() if wait else srv.watch.at_hand()
        got = None if fingerprint is None else (srv.boards_read.get if wait else srv.boards_read.now)(fingerprint, read)
        # made again only if a board went up or down
        return None if got is None else srv.exposition.text(got[0], gzipped=gzipped)[0]

    @app.get("/metrics", summary="Prometheus metrics (text format)")
    async def prometheus(request: Request):
        # Prometheus asks for gzip: the text shrinks twentyfold (593 kB to 27 kB at 100 boards of 2 CPUs)
        gzipped = "gzip" in request.headers.get("accept-encoding", "")
        # Answered on the event loop when all it needs is at hand (the store not queried, nothing waited for):
        # on a loaded controller host, the hop to a worker thread and back held scrapes for 100 ms and more.
        body = exposition(gzipped, wait=False)
        if body is None:
            body = await run_in_threadpool(exposition, gzipped, True)
        return Response(body, media_type=metrics.CONTENT_TYPE,
                        headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"} if gzipped else None)

    app.add_middleware(Guard, refused=refused, failure=failure)
    return app


class Guard:
    """Pure ASGI middleware around the routes: the token check, security headers on every response, HEAD
    answered wherever GET is (the GET's status and headers, Content-Length included, without its body; an
    event stream ends after its headers), and any exception the routes' handlers left turned into a message
    (never a trace, neither to the client nor in uvicorn's log)."""

    def __init__(self, app, refused, failure):
        self.app, self.refused, self.failure = app, refused, failure

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        head = scope["method"] == "HEAD"
        if head:
            scope = {**scope, "method": "GET"}   # the server's own scope keeps HEAD: it sends no body either
        started = ended = False

        async def send_secured(message):
            nonlocal started, ended
            if ended:   # a HEAD's answer is complete: what a stream sends after it goes nowhere
                return
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            elif head and message["type"] == "http.response.body":
                message, ended = {"type": "http.response.body", "body": b"", "more_body": False}, True
            await send(message)

        async def receive_head(receive=receive):
            # After a HEAD's answer the client is gone as far as the route knows: an event stream stops.
            return {"type": "http.disconnect"} if ended else await receive()

        if head:
            receive = receive_head
        request = Request(scope)
        if (answer := self.refused(request)) is not None:
            return await answer(scope, receive, send_secured)
        try:
            await self.app(scope, receive, send_secured)
        except Exception as exc:  # noqa: BLE001 - said to the client as a message, logged without a trace
            if started:
                raise
            await self.failure(request, exc)(scope, receive, send_secured)


def safe_next(target: str) -> str:
    """Only a path of this server (no scheme, no other host) to go on to after signing in."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"
