"""The rtscope command line. Command modules register on `app` when imported."""

from __future__ import annotations

import importlib
import sys

from ..errors import RtscopeError
from .common import app, err_console

COMMAND_MODULES = ["runs", "run", "system"]

for _name in COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}")


def main() -> None:
    try:
        app(standalone_mode=False)
    except RtscopeError as e:
        err_console.print(f"[bold red]rtscope: error:[/] {e}", highlight=False, markup=True, soft_wrap=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        err_console.print("rtscope: interrupted; nothing half-written was stored")
        sys.exit(130)
    except _click_exceptions() as e:
        e.show()
        sys.exit(e.exit_code)
    except _click_abort():
        err_console.print("rtscope: aborted")
        sys.exit(130)


def _click_exceptions():
    import click
    return click.ClickException


def _click_abort():
    import click
    return click.exceptions.Abort
