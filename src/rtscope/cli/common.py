"""Shared CLI pieces: the app, consoles, the --db and --json options, JSON output."""

from __future__ import annotations

import json
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from ..store import Store, to_jsonable

app = typer.Typer(
    name="rtscope",
    help="Measure, compare and improve the real-time behaviour of IoT and edge stacks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

DbOption = Annotated[Optional[str], typer.Option(
    "--db", help="Store: a SQLite file path or SQLAlchemy URL [default: $RTSCOPE_DB or ./rtscope.db]")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout, nothing else.")]


def open_store(db: Optional[str]) -> Store:
    return Store(db)


def print_json(obj: Any) -> None:
    typer.echo(json.dumps(to_jsonable(obj), indent=2, sort_keys=False))


def settings_text(settings: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "defaults"


__all__ = ["app", "console", "err_console", "DbOption", "JsonOption", "open_store", "print_json", "escape",
           "settings_text"]
