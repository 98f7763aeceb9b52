"""`rtscope serve`: the store as a live web application — pages, a JSON API and Prometheus metrics.

The top layer, beside `cli/` and `api.py`: it may import every layer below (the report's figures and tables,
the analysis, the store) and nothing imports it. It reads the store read-only and never writes it.

    app             the ASGI application (FastAPI): its routers, error handlers and middleware put together
    shared          what the routes share (the store, caches, templates, token), handed to them as a dependency
    routes_pages    the pages (lab, run, experiment, monitor, sign-in) and the files they load
    routes_api      the JSON API under /api/: the same documents `show --json`, `compare --json`... print
    routes_metrics  /metrics, answered on the event loop when all it needs is at hand
    routes_events   /events: server-sent events from the store's polled fingerprint
    failures        what a failed request tells its client: a message (JSON or a page), never a trace
    guard           the middleware: the token check, security headers, HEAD, the last resort for exceptions
    views           what each page shows, built from the report's figures and tables
    live            the store's fingerprint, polled, for server-sent events and the caches
    metrics         the Prometheus exposition (text format 0.0.4)
    origins         the store's runs counted per target and board, read incrementally
    boards          the lab's boards: each one's newest interval, up or down, watched or not, its controller
    shipped         the alerting rules and Grafana dashboard shipped for a lab's Prometheus (lab/)
    access          the token: loading it, checking requests, the host rule
"""
