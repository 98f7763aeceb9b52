"""Shared CLI pieces: the app, consoles, tables, the --db and --json options, JSON output.

Every `cli/*.py` module is imported for any command (even `--help`), so at module level they import only typer,
rich and rtscope's light modules; numpy, SQLAlchemy, the store, analysis, targets... are imported inside the
command that needs them (tests/test_cli_startup.py checks it, bench/cli_startup.py times it).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich import table as rich_table
from rich.console import Console, ConsoleDimensions
from rich.markup import escape

if TYPE_CHECKING:
    from ..store import Store

app = typer.Typer(
    name="rtscope",
    help="Measure, compare and improve the real-time behaviour of IoT and edge stacks.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (docs/cli.md)
    pretty_exceptions_enable=False,
    # Plain help: typer's rich help panels import rich's markdown and traceback modules, which would double
    # the time `--help` (and every completion, which starts rtscope) takes.
    rich_markup_mode=None,
    context_settings={"max_content_width": 120},  # a wide terminal gets wide help (click stops at 80)
)


class _Stdout(Console):
    """stdout's console. Output that is not a terminal (a pipe, a file) is laid out PIPE_WIDTH wide, whatever
    $COLUMNS says, so that every value of a table is on one line, whole: a terminal's width binds only a terminal."""

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        return size if self.is_terminal else ConsoleDimensions(max(size.width, PIPE_WIDTH), size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


PIPE_WIDTH = 10_000
# emoji=False: no `:name:` in a label or setting becomes an emoji (and the emoji table is not loaded).
console = _Stdout(highlight=False, emoji=False)
err_console = Console(stderr=True, highlight=False, emoji=False)


class Table(rich_table.Table):
    """The one table rtscope prints (the rule: a table never cuts a value). Every column folds a value longer than
    its width onto the next line (rich's default would cut it with "…", and no_wrap would crop it), so at any
    width every character of every value shows; piped, the console is wide enough (_Stdout) that nothing
    folds. Layouts that prefer other breaks (runs.stats_table) choose them before rich has to fold."""

    def add_column(self, header="", footer="", *, overflow: str = "fold", no_wrap: bool = False, **kw) -> None:
        if overflow != "fold" or no_wrap:
            raise ValueError(f"column {header!r}: a table never cuts a value (overflow={overflow!r}, "
                             f"no_wrap={no_wrap}); it folds")
        super().add_column(header, footer, overflow="fold", no_wrap=False, **kw)


DbOption = Annotated[Optional[str], typer.Option(
    "--db", help="Store: a SQLite file path or SQLAlchemy URL [default: $RTSCOPE_DB or ./rtscope.db]")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout, nothing else.")]


EXIT_SPOOLED = 75   # sysexits' EX_TEMPFAIL: done, but what was measured waits in the spool (the store unreachable)
STORE_WAIT_S = 60.0  # at a command's end, how long the spool is retried ($RTSCOPE_STORE_WAIT overrides)
OPENED: list = []    # the stores this process opened: a store error is said naming them (cli.main)


def open_store(db: Optional[str]) -> Store:
    """The store, its spool's news said on stderr: what an earlier rtscope left in it and this open wrote, and
    from now on each run spooled while the store is unreachable, and the spool written when it answers."""
    from ..store import Store
    store = Store(db)
    OPENED.append(store)
    keeper = store.keeper
    keeper.say = lambda text: err_console.print(f"[yellow]{escape(text)}[/]", soft_wrap=True)
    if keeper.last is not None:
        for line in keeper.last.corrupt:
            keeper.say(f"spool of store {keeper.shown_url}: {line}")
        if keeper.last.entries:
            keeper.say(f"store {keeper.shown_url}: {keeper.last.text()}, left in its spool by an earlier rtscope")
    return store


def settle(store: Store, what: str) -> None:
    """At the end of a command that measured: the spool written to the store, retried for up to
    $RTSCOPE_STORE_WAIT seconds (60); else an error (exit EXIT_SPOOLED) saying where the runs wait."""
    import os
    from ..errors import RtscopeError
    keeper = store.keeper
    if not keeper.spool.files():
        return
    try:
        wait = float(os.environ.get("RTSCOPE_STORE_WAIT", STORE_WAIT_S))
    except ValueError:
        wait = STORE_WAIT_S
    n = keeper.spool.pending_runs()
    err_console.print(f"{what}: {n} run{'s' if n != 1 else ''} in the spool of store {escape(keeper.shown_url)}; "
                      f"writing {'it' if n == 1 else 'them'} (retrying for up to {wait:.0f} s)", soft_wrap=True)
    if keeper.wait(wait):
        return
    n = keeper.spool.pending_runs()
    raise RtscopeError(f"store {keeper.shown_url} still unreachable ({keeper.error}): {n} run"
                       f"{'s' if n != 1 else ''} kept in its spool {keeper.spool.dir}; `rtscope db flush-spool "
                       f"--db ...` (or any rtscope opening this store) writes them", exit_code=EXIT_SPOOLED)


def store_error(e: BaseException) -> str | None:
    """A store's error (SQLAlchemy's) as one line naming the store and what its spool keeps; None for another
    error."""
    import sys
    if "sqlalchemy" not in sys.modules:
        return None
    from ..store import store_error as is_store_error
    if not is_store_error(e):
        return None
    from ..store.spool import one_line
    if not OPENED:
        return f"store error: {one_line(e)}"
    keeper = OPENED[-1].keeper
    n = keeper.spool.pending_runs()
    kept = (f"; {n} run{'s' if n != 1 else ''} kept in its spool {keeper.spool.dir}, written when it answers "
            "(or `rtscope db flush-spool`)" if n else "; nothing of this command is kept in its spool")
    return f"store {keeper.shown_url}: {one_line(e)}{kept}"


def print_json(obj: Any) -> None:
    from ..store import to_jsonable
    typer.echo(json.dumps(to_jsonable(obj), indent=2, sort_keys=False))


def settings_text(settings: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "defaults"


__all__ = ["app", "console", "err_console", "DbOption", "JsonOption", "open_store", "print_json", "escape",
           "settings_text", "Table", "PIPE_WIDTH", "settle", "store_error", "EXIT_SPOOLED"]
