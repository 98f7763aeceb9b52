"""The ASGI application: pages, the JSON API under /api/, /metrics and the live event stream.

FastAPI (on Starlette, under uvicorn): it validates query and path parameters from their types (a bad one is
a 422 naming it and its valid values) and describes the API as OpenAPI (/openapi.json) from the same code.
Store work is blocking, so the routes are plain functions that FastAPI runs in its thread pool; only the event
stream, /metrics and the sign-in's POST are coroutines. No error ever sends a stack trace: the client gets a
message (JSON under /api/ and /metrics, a page elsewhere), the server's log the details.

The routes live in one router per area (routes_pages, routes_api, routes_events, routes_metrics) and get the
shared Server (serve/shared.py) as a dependency; serve/failures.py answers errors, serve/guard.py wraps it all.
"""

from __future__ import annotations

from fastapi import FastAPI

from ..store import Store
from ..version import __version__
from . import failures, routes_api, routes_events, routes_metrics, routes_pages
from .access import Access
from .guard import Guard
from .shared import Server


# The order the routes match in. Given to FastAPI as its routes rather than by include_router: the
# application's list of routes stays one route per path (FastAPI 0.16x includes a router as one opaque entry).
ROUTERS = (routes_pages.router, routes_events.router, routes_api.router, routes_metrics.router)


def make_app(store: Store, access: Access) -> FastAPI:
    srv = Server(store, access)
    app = FastAPI(title="rtscope", version=__version__, docs_url=None, redoc_url=None,
                  description="The rtscope store, read-only: runs, experiments, comparisons and targets. "
                              "The documents are those `rtscope show --json` and `rtscope compare --json` print.",
                  routes=[route for router in ROUTERS for route in router.routes])
    app.state.server = srv
    failures.install(app)
    app.add_middleware(Guard, server=srv)
    return app
