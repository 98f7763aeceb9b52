"""/metrics: the lab's boards in Prometheus' text format, gzipped when the scraper asks (Prometheus does).

A coroutine: answered on the event loop when all it needs is at hand, in the thread pool otherwise.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from . import metrics
from .shared import Server, Shared

router = APIRouter()


def exposition(srv: Server, gzipped: bool, wait: bool) -> bytes | None:
    """/metrics' text (without `wait`: None unless the fingerprint and the boards' reading are at hand)."""
    def read():
        snap = metrics.read(srv.lab)
        srv.exposition.text(snap, gzipped=True)    # its text made here too, off the scrape
        return snap
    fingerprint = srv.watch.fingerprint() if wait else srv.watch.at_hand()
    got = None if fingerprint is None else (srv.boards_read.get if wait else srv.boards_read.now)(fingerprint, read)
    # made again only if a board went up or down
    return None if got is None else srv.exposition.text(got[0], gzipped=gzipped)[0]


@router.get("/metrics", summary="Prometheus metrics (text format)")
async def prometheus(request: Request, srv: Shared):
    # Prometheus asks for gzip: the text shrinks twentyfold (593 kB to 27 kB at 100 boards of 2 CPUs)
    gzipped = "gzip" in request.headers.get("accept-encoding", "")
    # Answered on the event loop when all it needs is at hand (the store not queried, nothing waited for):
    # on a loaded controller host, the hop to a worker thread and back held scrapes for 100 ms and more.
    body = exposition(srv, gzipped, wait=False)
    if body is None:
        body = await run_in_threadpool(exposition, srv, gzipped, True)
    return Response(body, media_type=metrics.CONTENT_TYPE,
                    headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"} if gzipped else None)
