"""`rtscope serve`: the store as a live web application — pages, a JSON API and Prometheus metrics.

The top layer, beside `cli/` and `api.py`: it may import every layer below (the report's figures and tables,
the analysis, the store) and nothing imports it. It reads the store read-only and never writes it.

    app        the ASGI application (FastAPI): routes, errors, the token check
    views      what each page shows, built from the report's figures and tables
    documents  the API's JSON: the same documents `show --json` and `compare --json` print
    live       the store's fingerprint, polled, for server-sent events and the caches
    metrics    the Prometheus exposition (prometheus_client)
    access     the token: loading it, checking requests, the host rule
"""
