"""Commands db migrate, db copy, db info: the store's schema and moving results between stores."""

from __future__ import annotations

from typing import Annotated

import typer

from ..errors import UsageError
from .common import DbOption, app, console, escape

db_app = typer.Typer(help="The store: schema version, migrations, copies (SQLite <-> PostgreSQL).",
                     no_args_is_help=True)
app.add_typer(db_app, name="db")


@db_app.command("info")
def info(db: DbOption = None) -> None:
    """The store's URL and schema version, and what `db migrate` would do."""
    from ..store import bare_engine, migrations
    engine = bare_engine(db)
    with engine.connect() as c:
        version = migrations.current(c)
    console.print(f"{escape(engine.url.render_as_string(hide_password=True))}: schema version {version} "
                  f"(this rtscope: {migrations.LATEST})")
    for line in migrations.describe(version):
        console.print(f"  pending: {escape(line)}")


@db_app.command("migrate")
def migrate(db: DbOption = None) -> None:
    """Bring the store's schema to this rtscope's version (under a lock; safe with other users connected)."""
    from ..store import bare_engine, metadata, migrations
    engine = bare_engine(db)
    with engine.connect() as c:
        pending = migrations.describe(migrations.current(c))
    before, after = migrations.migrate(engine, metadata)
    if before == after:
        console.print(f"store is at schema version {after}: nothing to do")
        return
    for line in pending:
        console.print(f"applied {escape(line)}")
    console.print(f"store migrated from schema version {before} to {after}")


@db_app.command("copy")
def copy(src: Annotated[str, typer.Argument(help="Store to copy from: a SQLite path or a URL.")],
         dst: Annotated[str, typer.Argument(help="Store to copy into (created if new): a path or a URL, "
                                                 "e.g. postgresql://lab@dbhost/rtscope.")]) -> None:
    """Copy every experiment and run (with all samples) into another store; repeatable: skips what is there."""
    from ..store import Store, copy as dbcopy, resolve_url
    if resolve_url(src) == resolve_url(dst):
        raise UsageError("source and destination are the same store")
    source, dest = Store(src), Store(dst)
    done = dbcopy.copy(source, dest)
    console.print(f"copied {done.experiments} experiment(s), {done.runs} run(s) ({done.chunks} sample chunks) "
                  f"from {escape(source.shown_url)} to {escape(dest.shown_url)}; {done.skipped_runs} run(s) "
                  "were there already")
