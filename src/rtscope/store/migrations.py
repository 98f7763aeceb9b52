"""Schema versions of the store, for SQLite and PostgreSQL alike, applied in order under a lock.

A store records its version in table `schema_version`. Opening a store
creates a fresh one at the newest version; an older store is upgraded by
`rtscope db migrate` (a lab's shared database is never changed behind its
users' backs), and a store newer than this rtscope is refused. Migrations run
in one transaction under a lock — PostgreSQL's advisory lock, a file lock
on a SQLite file — so that many rtscope processes opening a fresh
database at once create it exactly once.

To change the schema: change the tables in store/tables.py, then append a step
here that brings a store of the previous version to the new one. SQLAlchemy is imported inside the functions
(a step's too): `rtscope runs` and `show` read LATEST from here without it (store/sqlite_read.py).
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

from ..errors import RtscopeError

if TYPE_CHECKING:
    import sqlalchemy as sa

ADVISORY_KEY = 0x72747363  # "rtsc": PostgreSQL advisory lock id of rtscope's schema changes


@dataclass(frozen=True)
class Step:
    version: int
    what: str
    apply: Callable[[sa.Connection, sa.MetaData], None]


def _create_tables(conn: sa.Connection, metadata: sa.MetaData) -> None:
    metadata.create_all(conn)


def _unique_plan_index(conn: sa.Connection, metadata: sa.MetaData) -> None:
    conn.exec_driver_sql("CREATE UNIQUE INDEX IF NOT EXISTS runs_experiment_plan_index "
                         "ON runs (experiment_id, plan_index)")


def _tune_tables(conn: sa.Connection, metadata: sa.MetaData) -> None:
    from . import tunes
    tunes.metadata.create_all(conn)


def _sample_causes(conn: sa.Connection, metadata: sa.MetaData) -> None:
    metadata.tables["sample_causes"].create(conn, checkfirst=True)


def _lab_tables(conn: sa.Connection, metadata: sa.MetaData) -> None:
    from . import leases
    leases.metadata.create_all(conn)


def _running_bounds(conn: sa.Connection, metadata: sa.MetaData) -> None:
    metadata.tables["running_bounds"].create(conn, checkfirst=True)


STEPS = (
    Step(1, "experiments, runs and sample chunks (rtscope 0.1)", _create_tables),
    Step(2, "one stored run per experiment plan index (concurrent --resume stores nothing twice)",
         _unique_plan_index),
    Step(3, "tunes: a tune's candidates and planned runs, shared by the processes working on it (rtscope tune)",
         _tune_tables),
    Step(4, "sample_causes: the causes of the explained samples of a run (setting explain)", _sample_causes),
    Step(5, "lab_controllers, lab_boards: which controller watches which board, under a lease (rtscope monitor "
            "of a fleet, rtscope lab)", _lab_tables),
    Step(6, "running_bounds: each monitoring interval's worst case so far, as its controller fitted it (rtscope "
            "serve and rtscope lab show it without fitting again)", _running_bounds),
)
LATEST = STEPS[-1].version


def current(conn: sa.Connection) -> int:
    """The store's schema version: 0 for an empty database, 1 for a store of rtscope 0.1 (no version table)."""
    import sqlalchemy as sa

    from .tables import schema_version
    tables = set(sa.inspect(conn).get_table_names())
    if "schema_version" in tables:
        row = conn.execute(sa.select(schema_version.c.version).where(schema_version.c.id == 1)).first()
        return row[0] if row else 0
    return 1 if "runs" in tables else 0


@contextmanager
def _locked(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A transaction holding rtscope's schema lock."""
    url = engine.url
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        # flock on the store's directory, never on a descriptor of the database file: closing one would drop
        # every fcntl lock this process holds on the file, SQLite's own among them, and another process
        # closing the store last would then delete the WAL this process still reads (a corrupt read).
        directory = os.open(os.path.dirname(os.path.abspath(url.database)), os.O_RDONLY)
        try:
            fcntl.flock(directory, fcntl.LOCK_EX)
            with engine.begin() as conn:
                yield conn
        finally:
            os.close(directory)
        return
    with engine.begin() as conn:
        if url.get_backend_name() == "postgresql":
            import sqlalchemy as sa
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_KEY})
        yield conn


def migrate(engine: sa.Engine, metadata: sa.MetaData, *, create_only: bool = False) -> tuple[int, int]:
    """Bring the store to the newest version; (version before, version after).

    create_only: only create a fresh (empty) store; an older one is refused with the command that upgrades it.
    """
    from .tables import schema_version
    with engine.connect() as conn:
        found = current(conn)
    if found == LATEST:
        return found, found
    if found > LATEST:
        raise RtscopeError(f"store {engine.url.render_as_string(hide_password=True)} has schema version {found}, "
                           f"newer than this rtscope knows ({LATEST}): upgrade rtscope")
    with _locked(engine) as conn:
        found = current(conn)  # again, under the lock: another process may have done it meanwhile
        if found == LATEST:
            return found, found
        if create_only and found != 0:
            raise RtscopeError(f"store {engine.url.render_as_string(hide_password=True)} has schema version "
                               f"{found}; this rtscope needs {LATEST}: run `rtscope db migrate --db ...` "
                               "(back it up first; rtscope db copy makes a copy)")
        schema_version.create(conn, checkfirst=True)
        for step in STEPS:
            if step.version > found:
                step.apply(conn, metadata)
        conn.execute(schema_version.delete())
        conn.execute(schema_version.insert().values(id=1, version=LATEST))
    return found, LATEST


def describe(version: int) -> list[str]:
    return [f"{s.version}: {s.what}" for s in STEPS if s.version > version]
