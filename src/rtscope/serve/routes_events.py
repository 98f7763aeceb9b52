"""/events: server-sent events for the open pages, from the store's polled fingerprint (serve/live.Watch)."""

from __future__ import annotations

import asyncio
import json

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from ..store import unreachable
from .live import POLL_S
from .shared import Server, Shared

HEARTBEAT_S = 15

router = APIRouter(include_in_schema=False)


async def stream(request: Request, srv: Server):
    """`change` when the fingerprint moves, `unavailable` when the store cannot be reached (once per
    outage), a comment every HEARTBEAT_S of quiet; until the client goes."""
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


@router.get("/events")
async def events(request: Request, srv: Shared):
    """Server-sent events: `change` when a run or an experiment is stored or changes state, `unavailable`
    while the store cannot be reached."""
    return StreamingResponse(stream(request, srv), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
