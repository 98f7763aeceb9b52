"""Commands db migrate, db copy, db info, db flush-spool: the store's schema, moving results between stores, and
writing what was spooled while it was unreachable."""

from __future__ import annotations

from typing import Annotated

import typer

from ..errors import UsageError
from ..words import counted
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
    console.print(f"copied {counted(done.experiments, 'experiment')}, {counted(done.runs, 'run')} "
                  f"({counted(done.chunks, 'sample chunk')}) from {escape(source.shown_url)} to "
                  f"{escape(dest.shown_url)}; {counted(done.skipped_runs, 'run')} "
                  f"{'was' if done.skipped_runs == 1 else 'were'} there already")


@db_app.command("flush-spool")
def flush_spool(db: DbOption = None) -> None:
    """Write to the store what rtscope kept in its spool on this machine while the store was unreachable
    (runs, monitoring intervals, statuses): each run once. Any rtscope opening the store does it too."""
    from ..store import Store
    from ..store.spool import state_dir
    store = Store(db, flush_spool=False)
    keeper = store.keeper
    waiting = keeper.spool.pending_runs()
    done = keeper.flush()
    if done is None:
        from ..errors import RtscopeError
        from .common import EXIT_SPOOLED
        raise RtscopeError(f"store {keeper.shown_url} is unreachable ({keeper.error}): {counted(waiting, 'run')} "
                           f"{'stays' if waiting == 1 else 'stay'} in "
                           f"its spool {keeper.spool.dir}", exit_code=EXIT_SPOOLED)
    for line in done.corrupt:
        console.print(f"spool: {escape(line)}", soft_wrap=True)
    left = [str(p) for p in keeper.spool.corrupt_files()]
    if not done.entries:
        console.print(f"the spool of store {escape(keeper.shown_url)} is empty (spools live in "
                      f"{escape(str(state_dir() / 'spool'))})", soft_wrap=True)
    else:
        console.print(f"store {escape(keeper.shown_url)}: {escape(done.text())}", soft_wrap=True)
    if left:
        from ..errors import RtscopeError
        raise RtscopeError(f"{len(left)} spool file(s) could not be read and were not written: "
                           + ", ".join(left))
