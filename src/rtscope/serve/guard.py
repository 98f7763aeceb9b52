"""The middleware every request passes: the token check, security headers, HEAD, and the last resort for
exceptions (a message, never a trace, neither to the client nor in uvicorn's log)."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.datastructures import MutableHeaders

from .access import COOKIE
from .failures import failure, wants_json
from .shared import Server

OPEN_PATHS = ("/login", "/static/serve.css", "/static/serve.js")  # the sign-in page and what it needs
# Scripts only from this server (the page's own and plotly's); plotly sets inline styles.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
SECURITY_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "same-origin"}


def refused(srv: Server, request: Request) -> Response | None:
    """The answer to a request without the token (None: let it through)."""
    if request.url.path.startswith(OPEN_PATHS) or srv.access.allows(request.headers.get("authorization"),
                                                                     request.cookies.get(COOKIE)):
        return None
    if wants_json(request):
        return JSONResponse({"detail": "this server needs its token: send the header "
                                       "'Authorization: Bearer TOKEN'"}, status_code=401,
                            headers={"WWW-Authenticate": "Bearer"})
    return RedirectResponse(f"/login?next={quote(str(request.url.path))}", status_code=303)


class Guard:
    """Pure ASGI middleware around the routes: the token check, security headers on every response, HEAD
    answered wherever GET is (the GET's status and headers, Content-Length included, without its body; an
    event stream ends after its headers), and any exception the routes' handlers left turned into a message
    (never a trace, neither to the client nor in uvicorn's log)."""

    def __init__(self, app, server: Server):
        self.app, self.server = app, server

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
        if (answer := refused(self.server, request)) is not None:
            return await answer(scope, receive, send_secured)
        try:
            await self.app(scope, receive, send_secured)
        except Exception as exc:  # noqa: BLE001 - said to the client as a message, logged without a trace
            if started:
                raise
            await failure(self.server, request, exc)(scope, receive, send_secured)
