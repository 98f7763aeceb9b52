"""The rtscope command line. Command modules register on `app` when imported: `rtscope NAME` is `cli/NAME.py`
(`tasks-table` in `tasks_table.py`, `import` in `import_.py`), the `db` group in `db.py`; `common.py` holds the
app, the consoles and the shared options and tables, `doctor.py` also `--version`.

The top layer, beside `api.py` (the pandas API): it may import every layer below and only renders what they
return; nothing imports it.
"""

from __future__ import annotations

import importlib
import sys

from ..errors import RtscopeError
from ..signals import keep_exit_code
from .common import EXIT_SPOOLED, OPENED, SAID, app, err_console, escape, store_error

# One module per command, named after it (`import_`: `import` is a keyword; `db`'s sub-commands share `db`), in
# the order `rtscope --help` lists them.
COMMAND_MODULES = ["runs", "show", "export", "run", "check", "demo", "import_", "sysinfo", "targets", "compare",
                   "recommend", "report", "fit", "tasks_table", "storage_table", "histogram", "db", "monitor", "lab",
                   "tune", "explain", "serve", "specs", "doctor", "plan", "tail",
                   "reproduce"]

for _name in COMMAND_MODULES:
    importlib.import_module(f"{__name__}.{_name}")


def said_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A Python warning that got this far (each known one is fixed at its cause, and the tests make any warning of
    show, tail, report, runs and import an error): one line in rtscope's words, not a library's source line."""
    path = str(filename).replace("\\", "/")
    where = (path.split("site-packages/")[1].split("/")[0] if "site-packages/" in path else
             path.rsplit("/")[-1].removesuffix(".py"))
    err_console.print(f"[yellow]rtscope: warning:[/] {escape(str(message))} (from {escape(where)}: rtscope did "
                      "not expect it, so the figures above may be affected; please report it)", soft_wrap=True)


def main() -> None:
    # Typer handles usage errors (exit 2) itself; rtscope's own errors become one clean line. Python warnings are
    # shown in rtscope's words (said_warning); the filters (-W, PYTHONWARNINGS) still decide which are shown.
    import warnings
    shown, warnings.showwarning = warnings.showwarning, said_warning
    try:
        app()
    except RtscopeError as e:
        print_error(str(e))
        sys.exit(e.exit_code)
    except Exception as e:
        said = store_error(e)   # a store's error is one line naming the store, never a traceback
        if said is None:
            raise
        from ..store import unreachable
        print_error(said)
        sys.exit(EXIT_SPOOLED if unreachable(e) else 1)
    finally:
        warnings.showwarning = shown
        keep_exit_code()
        OPENED.clear()   # the command's stores are let go (main called again in one process opens its own)
        SAID.clear()


def print_error(text: str) -> None:
    """`rtscope: error: ...` on stderr, the one way every error is said (a spec's problems: one a line, `check`
    and `run` alike). Never wrapped: a message is matched, grepped and pasted whole."""
    err_console.print(f"[bold red]rtscope: error:[/] {escape(text)}", soft_wrap=True)
