"""Command serve: the store as a live web application, a JSON API and Prometheus metrics (docs/serve.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import UsageError
from .common import DbOption, app

DEFAULT_PORT = 8321


@app.command()
def serve(
    db: DbOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on; anything but loopback needs --token-file.")]
    = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0: any free port, printed).")] = DEFAULT_PORT,
    token_file: Annotated[Optional[Path], typer.Option(
        "--token-file", help="A file holding the token every request must carry (mode 600).")] = None,
    print_alert_rules: Annotated[bool, typer.Option(
        "--print-alert-rules", help="Print Prometheus alerting rules over /metrics (board down, maximum above a "
                                    "threshold, p99.99 regression against the board's last week) and exit.")]
    = False,
    print_grafana_dashboard: Annotated[bool, typer.Option(
        "--print-grafana-dashboard", help="Print a Grafana dashboard of /metrics' series (JSON, to import) and "
                                          "exit.")] = False,
) -> None:
    """Serve the store read-only: live lab pages, a JSON API under /api/ and Prometheus metrics at /metrics."""
    if print_alert_rules or print_grafana_dashboard:
        from ..serve import shipped
        if print_alert_rules and print_grafana_dashboard:
            raise UsageError("give one of --print-alert-rules and --print-grafana-dashboard (each prints one file)")
        typer.echo(shipped.text(shipped.ALERT_RULES if print_alert_rules else shipped.GRAFANA_DASHBOARD), nl=False)
        return
    from ..serve.access import Access, check_host, load_token
    from ..store import Store
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be 0..65535, got {port}")
    check_host(host, token_file)
    check_port_free(host, port)
    access = Access(load_token(token_file) if token_file else None)
    store = Store(db, read_only=True)

    import uvicorn
    from ..serve.app import make_app

    class Announce(uvicorn.Server):
        async def startup(self, sockets=None):
            await super().startup(sockets)
            for server in self.servers:
                for sock in server.sockets:
                    bound_host, bound_port = sock.getsockname()[:2]
                    typer.echo(f"rtscope serve: {store.shown_url} read-only at http://{bound_host}:{bound_port}/"
                               + (" (token required)" if access.required else ""))

    config = uvicorn.Config(make_app(store, access), host=host, port=port, log_level="info",
                            timeout_graceful_shutdown=3, server_header=False)
    Announce(config).run()


def check_port_free(host: str, port: int) -> None:
    """Fail before anything starts when the address cannot be listened on (in use, not this machine's)."""
    import socket
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise UsageError(f"--host {host}: {e.strerror or e}") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as e:
            raise UsageError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
