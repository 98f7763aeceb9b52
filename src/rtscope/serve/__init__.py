"""`rtscope serve`: the store as a live web application — pages, a JSON API and Prometheus metrics.

The top layer, beside `cli/` and `api.py`: it may import every layer below (the report's figures and tables,
the analysis, the store) and nothing imports it. It reads the store read-only and never writes it.

    app        the ASGI application (FastAPI): routes, errors, the token check
    views      what each page shows, built from the report's figures and tables
    documents  the API's JSON: the same documents `show --json` and `compare --json` print
    live       the store's fingerprint, polled, for server-sent events and the caches
    metrics    the Prometheus exposition (text format 0.0.4)
    origins    the store's runs counted per target and board, read incrementally
    boards     the lab's boards: each one's newest monitoring interval, up or down, watched or not, its controller
    shipped    the alerting rules and the Grafana dashboard shipped for a lab's Prometheus and Grafana (lab/)
    access     the token: loading it, checking requests, the host rule
"""
