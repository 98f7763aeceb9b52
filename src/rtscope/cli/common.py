"""Shared CLI pieces: the app, consoles, tables (`stats_table`: runs' figures), the --db and --json options, JSON
output.

Every `cli/*.py` module is imported for any command (even `--help`), so at module level they import only typer,
rich and rtscope's light modules; numpy, SQLAlchemy, the store, analysis, targets... are imported inside the
command that needs them (tests/test_cli_startup.py checks it, bench/cli_startup.py times it).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich import table as rich_table
from rich.console import Console, ConsoleDimensions, Group
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
    folds. Layouts that prefer other breaks (stats_table) choose them before rich has to fold."""

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


def open_store(db: Optional[str], open_later: bool = False) -> Store:
    """The store, its spool's news said on stderr: what an earlier rtscope left in it and this open wrote, and
    from now on each run spooled while the store is unreachable, and the spool written when it answers.
    open_later: a server that does not answer yet is not an error (Store's open_later)."""
    from ..store import Store
    store = Store(db, open_later=open_later)
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


def layout_width(to: Console | None = None) -> int | None:
    """The width prose and tables are laid out for: a terminal's; piped, $COLUMNS when it is set (COLUMNS=80 rtscope
    compare ... | less); else None: a pipe has no width of its own, and nothing is wrapped (grep finds whole lines)."""
    import os
    to = to or console
    if to.is_terminal:
        return to.width
    columns = os.environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def wrapped(text: str, width: int | None, indent: str = "", hang: str = "    ") -> str:
    """Plain `text` (no markup) on lines of at most `width` characters, continuation lines indented by `hang`;
    unchanged when width is None."""
    if width is None:
        return indent + text
    import textwrap
    from ..analysis.select import PARAM_WORDS
    for words in PARAM_WORDS.values():      # `size n=4000` kept on one line: a bare `n=4000` reads as a count
        text = text.replace(words + "=", words.replace(" ", "\0") + "=")
    return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent + hang,
                         break_long_words=True, break_on_hyphens=False).replace("\0", " ")


SAID: set[str] = set()   # notes said once per process (an experiment name resolved)


def note_experiment(store: Store, ref: str | None) -> None:
    """Every command that takes --experiment ID|NAME says, on stderr, which experiment a name shared by several
    meant (the latest; analysis.select.experiment_id): one note, the same everywhere."""
    if not ref:
        return
    from ..analysis.select import experiment_note
    text = experiment_note(store, ref)
    if text and text not in SAID:
        SAID.add(text)
        said = escape(wrapped(f"note: {text}", layout_width(err_console)))
        err_console.print(f"[yellow]note:[/]{said[len('note:'):]}", soft_wrap=True)


def print_json(obj: Any) -> None:
    from ..store import to_jsonable
    typer.echo(json.dumps(to_jsonable(obj), indent=2, sort_keys=False))


def settings_text(settings: dict, run=None) -> str:
    """`k=v, ...`; with the run they are of, a setting it did not get says what was in force (select.setting_text)."""
    in_force = {}
    if run is not None:
        from ..analysis.select import not_in_force, setting_text
        in_force = {k: f for k, _, f in not_in_force(run)}
    return ", ".join(setting_text(k, v, in_force) if k in in_force else f"{k}={v}"
                     for k, v in sorted(settings.items())) or "defaults"


__all__ = ["app", "console", "err_console", "DbOption", "JsonOption", "open_store", "print_json", "escape",
           "settings_text", "Table", "PIPE_WIDTH", "settle", "store_error",
           "EXIT_SPOOLED", "layout_width", "wrapped", "note_experiment"]


def with_unit(key: str, shown: str, sep: str = " ") -> str:
    """A statistic's header suffix for its display unit `shown` (analysis.results.display_unit): ` (µs)`, a
    variance's ` (µs²)`; nothing for a count, nor for a unitless quantity (never an empty `()` or `(²)`)."""
    if key == "n" or not shown:
        return ""
    return f"{sep}({shown}²)" if key == "var" else f"{sep}({shown})"


def stats_table(title: str, rows: list[tuple[str, dict]], unit: str, keys=None, width: int | None = None):
    """One table of figures per row label (`keys`: the (statistic, header) columns, by default
    analysis.results.DISPLAY), for a terminal of `width` columns (the console's by default).

    Figures and their headers always show whole: labels fold to make room; where the figures still do not fit,
    the headers put their unit on a second line, then the units move into the title, and last the columns go
    into as many tables as needed, one under the other, each with the labels."""
    from ..analysis.results import DISPLAY, display_unit, fmt
    keys = DISPLAY if keys is None else keys
    width = width or console.width
    shown, scale = display_unit(unit)
    figures = {k: [fmt(k, st.get(k), scale) for _, st in rows] for k, _ in keys}
    longest = max((len(label) for label, _ in rows), default=3)

    def heads(unit_sep: str | None) -> dict[str, str]:
        return {k: head + ("" if unit_sep is None else with_unit(k, shown, unit_sep)) for k, head in keys}

    def column_width(key: str, head: str) -> int:
        return max(len(line) for line in [*figures[key], *head.split("\n")])

    def need(chunk, named: dict[str, str]) -> int:  # 3 characters of border and padding per column
        return label_width + sum(column_width(k, named[k]) for k in chunk) + 3 * (len(chunk) + 1) + 1

    # The first layout that fits: roomy labels before narrow ones, units in the headers before the title.
    for label_width, unit_sep in ((w, sep) for w in (min(longest, 24), min(longest, 12)) for sep in (" ", "\n", None)):
        named = heads(unit_sep)
        if need(named, named) <= width:
            break
    title_unit = "" if unit_sep or not shown else f" (in {shown}{f', VAR in {shown}²' if 'var' in named else ''})"
    chunks: list[list[str]] = [[]]
    for key in named:
        if chunks[-1] and need([*chunks[-1], key], named) > width:
            chunks.append([])
        chunks[-1].append(key)
    tables = []
    for chunk in chunks:
        table = Table(title=(title + title_unit) if chunk is chunks[0] else None)
        table.add_column("run", min_width=label_width)
        for key in chunk:
            table.add_column(named[key], justify="right", min_width=column_width(key, named[key]))
        for i, (label, _) in enumerate(rows):
            table.add_row(escape(label), *(figures[k][i] for k in chunk))
        tables.append(table)
    return tables[0] if len(tables) == 1 else Group(*tables)
