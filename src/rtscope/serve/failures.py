"""What a failed request tells its client: a message, never a stack trace.

JSON under /api/, /metrics, /events and /openapi.json, a page elsewhere; the server's log gets the details.
`install` registers the exception handlers; `failure` answers what they left (the Guard calls it).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import RtscopeError, UsageError
from ..store import unreachable
from . import views
from .shared import Server

log = logging.getLogger("rtscope.serve")
API_PREFIXES = ("/api/", "/metrics", "/events", "/openapi.json")
# What each parameter accepts, for the 422 message (the routes' own constraints say the same to OpenAPI).
VALID = {"limit": "1..1000", "offset": "0 or more", "experiment": "an experiment id", "alpha": "0 < alpha < 1",
         "per_thread": "true or false",
         "run_id": "a run id (see /api/runs)", "exp_id": "an experiment id", "run": "a run id (see /api/runs)",
         "where": "NAME=VALUE"}


def wants_json(request: Request) -> bool:
    return request.url.path.startswith(API_PREFIXES)


def error(srv: Server, request: Request, status: int, message: str) -> Response:
    if wants_json(request):
        return JSONResponse({"detail": message}, status_code=status)
    return srv.page("error.html", status=status, status_code=status, message=message, title=f"error {status}")


def failure(srv: Server, request: Request, exc: Exception) -> Response:
    """The answer to an exception no handler took: the store unreachable (503), rtscope's own error (500, its
    message) or anything else (500, logged with its trace)."""
    if unreachable(exc):
        shown = srv.store.shown_url
        log.warning("store %s unreachable: %s", shown, str(exc).splitlines()[0] if str(exc) else exc)
        return error(srv, request, 503, f"the store {shown} cannot be reached (database server down or "
                                        "connection lost); this works again as soon as it is back")
    if isinstance(exc, RtscopeError):
        return error(srv, request, 500, str(exc))
    log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error(srv, request, 500, "internal error: the server's log says more")


def bad_parameters(exc: RequestValidationError) -> str:
    """Each bad parameter named, with what it was given and what it accepts."""
    problems = []
    for e in exc.errors():
        where, *names = [str(x) for x in e.get("loc", ())] or ["request"]
        name = ".".join(n for n in names if not n.isdigit()) or where      # run.0 (a list's item): run
        given = e.get("input")
        shown = f"={given!r}" if isinstance(given, (str, int, float)) else ""
        valid = f" (valid: {VALID[name]})" if name in VALID else ""
        problems.append(f"bad {where} parameter {name}{shown}: {e.get('msg', 'invalid')}{valid}")
    return "; ".join(problems)


async def not_found(request: Request, exc: views.NotFound):
    return error(request.app.state.server, request, 404, str(exc))


async def http_error(request: Request, exc: StarletteHTTPException):
    message = f"no such page: {request.url.path}" if exc.status_code == 404 else str(exc.detail)
    return error(request.app.state.server, request, exc.status_code, message)


async def bad_parameter(request: Request, exc: RequestValidationError):
    return error(request.app.state.server, request, 422, bad_parameters(exc))


async def usage_error(request: Request, exc: UsageError):
    return error(request.app.state.server, request, 422, str(exc))


def install(app: FastAPI) -> None:
    """The exception handlers: each exception the routes raise answered with its status and message."""
    app.add_exception_handler(views.NotFound, not_found)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, bad_parameter)
    app.add_exception_handler(UsageError, usage_error)
