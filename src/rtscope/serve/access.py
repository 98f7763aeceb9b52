"""Who may use the server: loopback only unless a token is given; with a token, every request carries it.

A client shows the token as a bearer header (`Authorization: Bearer TOKEN`: scripts, Prometheus) or, in a
browser, a cookie set by the login form. The cookie holds an HMAC of the token, not the token, and no
message or log line ever contains either.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import stat
from pathlib import Path

from ..errors import UsageError

COOKIE = "rtscope_session"
MAKE_TOKEN = ("make one with: (umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > "
              "rtscope.token), then give --token-file rtscope.token")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_host(host: str, token_file: Path | None) -> None:
    """A server reachable from other machines needs a token."""
    if not is_loopback(host) and token_file is None:
        raise UsageError(f"--host {host} makes the server reachable from other machines: give --token-file too "
                         f"(every request must then carry the token); {MAKE_TOKEN}")


def load_token(path: Path) -> str:
    """The token: the file's first line; the file must be readable by its owner only."""
    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UsageError(f"cannot read --token-file {path}: {e.strerror or e}; {MAKE_TOKEN}") from None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UsageError(f"--token-file {path} is readable by others (mode {stat.filemode(info.st_mode)}): "
                         f"chmod 600 {path}")
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if len(token) < 16:
        raise UsageError(f"--token-file {path} holds no token of at least 16 characters; {MAKE_TOKEN}")
    return token


class Access:
    """Checks a request's bearer header or session cookie against the token (None: open, loopback only)."""

    def __init__(self, token: str | None):
        self._token = token
        self._session = (hmac.new(token.encode(), b"rtscope serve session", hashlib.sha256).hexdigest()
                         if token else None)

    @property
    def required(self) -> bool:
        return self._token is not None

    def allows(self, authorization: str | None, cookie: str | None) -> bool:
        if self._token is None:
            return True
        if authorization and authorization.lower().startswith("bearer "):
            return hmac.compare_digest(authorization[7:].strip().encode(), self._token.encode())
        return bool(cookie) and hmac.compare_digest(cookie.encode(), self._session.encode())

    def session_for(self, offered: str) -> str | None:
        """The cookie value for a login with `offered`, or None when it is not the token."""
        if self._token is not None and hmac.compare_digest(offered.strip().encode(), self._token.encode()):
            return self._session
        return None

