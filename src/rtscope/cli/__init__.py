"""The rtscope command line. Command modules register on `app` when imported.

The top layer, beside `api.py` (the pandas API): it may import every layer below and only renders what they
return; nothing imports it.
"""

from __future__ import annotations

import importlib
import sys

from ..errors import RtscopeError
from .common import EXIT_SPOOLED, app, err_console, escape, store_error

COMMAND_MODULES = ["runs", "run", "system", "analysis", "fit", "storage", "latency", "db", "monitor", "tune",
                   "explain", "serve", "specs", "about", "plan", "tail"]

for _name in COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}")


def main() -> None:
    # Typer handles usage errors (exit 2) itself; rtscope's own errors become one clean line.
    try:
        app()
    except RtscopeError as e:
        err_console.print(f"[bold red]rtscope: error:[/] {escape(str(e))}", soft_wrap=True)
        sys.exit(e.exit_code)
    except Exception as e:
        said = store_error(e)   # a store's error is one line naming the store, never a traceback
        if said is None:
            raise
        from ..store import unreachable
        err_console.print(f"[bold red]rtscope: error:[/] {escape(said)}", soft_wrap=True)
        sys.exit(EXIT_SPOOLED if unreachable(e) else 1)
