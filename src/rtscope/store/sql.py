"""The store through SQLAlchemy Core: writes, migrations, PostgreSQL and every other database SQLAlchemy speaks.

Raw samples are kept column-wise as little-endian binary chunks, so that 10^7
samples load in a fraction of a second and nothing is ever summarised away.
Each run is inserted in one transaction: a run is stored whole or not at all.
Used through `Store` (store/__init__.py), which reads a SQLite store without it where it can.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from ..errors import RtscopeError, UsageError
from ..version import __version__
from . import migrations
from .records import CAUSE_COLUMNS, DuplicateRun, Run, check_sqlite_file, resolve_url
from .sqlite_read import read_chunks
from .tables import experiments, metadata, running_bounds, runs, sample_causes, sample_chunks
from .leases import LeaseTables
from .tunes import TuneTables

if TYPE_CHECKING:  # numpy (and the sample file, which needs it) only where samples are read or written
    import numpy as np

    from ..samplefile import SampleFile

CHUNK = 1 << 20  # values per stored blob
CONNECT_TIMEOUT_S = 10
# TCP keepalives on every PostgreSQL connection (libpq's parameters): a half-open connection (the server's host
# gone, a cable pulled) is found within idle + interval × count = 30 s when idle, and within tcp_user_timeout when
# data sent is not acknowledged, rather than after the system's TCP timeouts of minutes or hours.
PG_KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 4,
                 "tcp_user_timeout": 30_000}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _check_sqlite_path(url: sa.engine.URL) -> None:
    if url.database and url.database != ":memory:":
        check_sqlite_file(Path(url.database))


class SqlStore:
    """The store through SQLAlchemy: every write, migrations, PostgreSQL, and every read (Store uses it
    for what the SQLite read path does not answer)."""

    def __init__(self, db: str | None = None, *, read_only: bool = False):
        """read_only: as Store's."""
        self.url = resolve_url(db)
        try:
            url = sa.engine.make_url(self.url)
        except SQLAlchemyError as e:
            raise UsageError(f"invalid store URL {self.url!r}: {e}") from None
        if url.get_backend_name() == "sqlite" and not read_only:
            _check_sqlite_path(url)
        try:
            if read_only:
                self.engine = _read_only_engine(url)
                with self.engine.connect() as c:
                    found = migrations.current(c)
                if found != migrations.LATEST:
                    raise RtscopeError(f"store {self.shown_url} has schema version {found}; this rtscope reads "
                                       f"version {migrations.LATEST}" + (": it is empty (no runs stored yet)"
                                                                         if found == 0 else
                                                                         ": run `rtscope db migrate --db ...`"))
            else:
                # A server that does not answer is given up on after a while (a spool keeps what is measured
                # meanwhile, store/spool.py), rather than after the system's TCP timeout of minutes.
                connect = {"connect_timeout": CONNECT_TIMEOUT_S, **PG_KEEPALIVES} \
                    if url.get_backend_name() == "postgresql" else {}
                self.engine = sa.create_engine(url, connect_args=connect)
                if url.get_backend_name() == "sqlite":
                    sa.event.listen(self.engine, "connect", _sqlite_pragmas)
                migrations.migrate(self.engine, metadata, create_only=True)
            self.tunes = TuneTables(self.engine, runs, experiments)
            self.leases = LeaseTables(self.engine)
        except SQLAlchemyError as e:
            raise (StoreUnreachable if unreachable(e) else RtscopeError)(
                f"cannot open store {self.shown_url}: {e.orig if hasattr(e, 'orig') else e}") from None

    @property
    def shown_url(self) -> str:
        """The URL without its password, for messages."""
        return sa.engine.make_url(self.url).render_as_string(hide_password=True)

    @contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        with self.engine.begin() as conn:
            yield conn

    # --- writing -----------------------------------------------------------------
    def add_run(self, sf: SampleFile, environment: dict, *, tags: list[str] | None = None,
                experiment_id: int | None = None, plan_index: int | None = None, cell: str | None = None,
                repetition: int | None = None, source: str | None = None, conn: sa.Connection | None = None,
                causes: list[dict] | None = None, stored_at: str | None = None) -> int:
        """Insert one run and all its samples (and the causes of its explained samples) in one transaction;
        return its id. stored_at: when it was first stored (a spooled run keeps its own, store/spool.py)."""
        h = sf.header
        row = {
            "experiment_id": experiment_id, "plan_index": plan_index, "cell": cell, "repetition": repetition,
            "workload": h["workload"], "variant": h["variant"], "runtime": h["runtime"],
            "tool": h["tool"], "tool_version": h["tool_version"], "rtscope_version": __version__,
            "started_at": h["started_at"], "finished_at": sf.trailer.get("finished_at"),
            "stored_at": stored_at or _now(),
            "settings": h["settings"], "params": h["params"], "columns": h["columns"], "header": h,
            "trailer": sf.trailer, "environment": environment, "tags": sorted(set(tags or [])),
            "n_samples": sf.n, "source": source,
        }
        if conn is None:
            with self.transaction() as c:
                return self._insert_causes(c, self._insert(c, row, sf), causes)
        return self._insert_causes(conn, self._insert(conn, row, sf), causes)

    def _insert(self, conn: sa.Connection, row: dict, sf: SampleFile) -> int:
        try:
            run_id = conn.execute(runs.insert().values(**row)).inserted_primary_key[0]
        except sa.exc.IntegrityError:
            if row["experiment_id"] is None:
                raise
            raise DuplicateRun(f"run {row['plan_index'] + 1} of experiment {row['experiment_id']} is stored "
                               "already (by another process resuming it)") from None
        import numpy as np
        chunks = []
        for col in sf.columns:
            arr = np.ascontiguousarray(sf.data[col.name], dtype=col.dtype)
            for i, start in enumerate(range(0, max(len(arr), 1), CHUNK)):
                chunks.append({"run_id": run_id, "column": col.name, "chunk": i, "dtype": col.dtype.str,
                               "data": arr[start:start + CHUNK].tobytes()})
        conn.execute(sample_chunks.insert(), chunks)
        return run_id

    @staticmethod
    def has_run_like(conn: sa.Connection, sf: SampleFile, stored_at: str, source: str | None) -> bool:
        """A run of no experiment with this identity is stored (a spooled import written before, store/spool.py)."""
        h = sf.header
        q = sa.select(runs.c.id).where(runs.c.experiment_id.is_(None), runs.c.started_at == h["started_at"],
                                       runs.c.stored_at == stored_at, runs.c.workload == h["workload"],
                                       runs.c.variant == h["variant"], runs.c.n_samples == sf.n,
                                       runs.c.source.is_(None) if source is None else runs.c.source == source)
        return conn.execute(q.limit(1)).first() is not None

    @staticmethod
    def _insert_causes(conn: sa.Connection, run_id: int, causes: list[dict] | None) -> int:
        if causes:
            conn.execute(sample_causes.insert(), [
                {"run_id": run_id, **{k: c.get(k) for k in CAUSE_COLUMNS},
                 "detail": {k: v for k, v in c.items() if k not in CAUSE_COLUMNS}} for c in causes])
        return run_id

    # --- experiments -------------------------------------------------------------
    def add_experiment(self, row: dict) -> int:
        with self.transaction() as c:
            return c.execute(experiments.insert().values(**row)).inserted_primary_key[0]

    def experiment_row(self, exp_id: int) -> dict | None:
        with self.engine.connect() as c:
            row = c.execute(sa.select(experiments).where(experiments.c.id == exp_id)).mappings().first()
        return dict(row) if row else None

    def latest_experiment_row(self, spec_path: str, statuses: tuple[str, ...]) -> dict | None:
        """The newest experiment of this spec file in one of these states."""
        q = (sa.select(experiments).where(experiments.c.spec_path == spec_path, experiments.c.status.in_(statuses))
             .order_by(experiments.c.id.desc()).limit(1))
        with self.engine.connect() as c:
            row = c.execute(q).mappings().first()
        return dict(row) if row else None

    def experiment_names(self) -> list[tuple[int, str]]:
        with self.engine.connect() as c:
            return [(r.id, r.name) for r in c.execute(sa.select(experiments.c.id, experiments.c.name)
                                                        .order_by(experiments.c.id))]

    def update_experiment(self, exp_id: int, **values: Any) -> None:
        with self.transaction() as c:
            c.execute(experiments.update().where(experiments.c.id == exp_id).values(**values))

    def stored_plan_indexes(self, exp_id: int) -> set[int]:
        """The plan indexes of an experiment's runs already stored."""
        q = sa.select(runs.c.plan_index).where(runs.c.experiment_id == exp_id)
        with self.engine.connect() as c:
            return {i for (i,) in c.execute(q) if i is not None}

    # --- reading -----------------------------------------------------------------
    def runs(self, *, workload: str | None = None, experiment_id: int | None = None,
             ids: list[int] | None = None) -> list[Run]:
        q = sa.select(runs).order_by(runs.c.id)
        if workload:
            q = q.where(runs.c.workload == workload)
        if experiment_id is not None:
            q = q.where(runs.c.experiment_id == experiment_id)
        if ids is not None:
            q = q.where(runs.c.id.in_(ids))
        with self.engine.connect() as c:
            return [Run.from_row(dict(r)) for r in c.execute(q).mappings()]

    def newest_runs(self, experiment_id: int, *, up_to: int, limit: int) -> list[Run]:
        """The experiment's newest `limit` runs with ids up to `up_to`, in id order (one query, whatever the
        experiment's length: a monitoring's running bound)."""
        q = (sa.select(runs).where(runs.c.experiment_id == experiment_id, runs.c.id <= up_to)
             .order_by(runs.c.id.desc()).limit(limit))
        with self.engine.connect() as c:
            return [Run.from_row(dict(r)) for r in c.execute(q).mappings()][::-1]

    def run_page(self, *, workload: str | None = None, experiment_id: int | None = None, limit: int = 100,
                 offset: int = 0) -> tuple[list[Run], int]:
        """One page of runs in id order, as `runs` filters them, and how many match in all."""
        where = [c for c in (runs.c.workload == workload if workload else None,
                             runs.c.experiment_id == experiment_id if experiment_id is not None else None)
                 if c is not None]
        q = sa.select(runs).where(*where).order_by(runs.c.id).limit(limit).offset(offset)
        with self.engine.connect() as c:
            total = c.execute(sa.select(sa.func.count()).select_from(runs).where(*where)).scalar_one()
            return [Run.from_row(dict(r)) for r in c.execute(q).mappings()], total

    def machines(self, run_ids: list[int]) -> dict[int, dict]:
        """The machine records of these runs, by run id (nothing else of the runs read)."""
        q = sa.select(runs.c.id, runs.c.environment).where(runs.c.id.in_(run_ids))
        with self.engine.connect() as c:
            return {i: env or {} for i, env in c.execute(q)}

    def latest_run_ids(self, limit: int) -> list[int]:
        """The ids of the newest stored runs, newest first."""
        q = sa.select(runs.c.id).order_by(runs.c.id.desc()).limit(limit)
        with self.engine.connect() as c:
            return [i for (i,) in c.execute(q)]

    def run_origins(self, after_id: int = 0) -> list[tuple[int, str, dict, str, list[str]]]:
        """(id, workload, settings, stored_at, tags) of every run with an id above after_id: what the lab's
        overview counts, without the runs' larger columns."""
        q = sa.select(runs.c.id, runs.c.workload, runs.c.settings, runs.c.stored_at, runs.c.tags) \
            .where(runs.c.id > after_id).order_by(runs.c.id)
        with self.engine.connect() as c:
            return [tuple(r) for r in c.execute(q)]

    def run_count(self) -> int:
        with self.engine.connect() as c:
            return c.execute(sa.select(sa.func.count()).select_from(runs)).scalar_one()

    def experiment_statuses(self, ids: list[int]) -> dict[int, str]:
        """The status of each of these experiments (their specs and plans are not read)."""
        if not ids:
            return {}
        q = sa.select(experiments.c.id, experiments.c.status).where(experiments.c.id.in_(ids))
        with self.engine.connect() as c:
            return {i: status for i, status in c.execute(q)}

    def experiment_rows(self, statuses: tuple[str, ...] | None = None) -> list[dict]:
        """Experiments, newest first, with how many of their runs are stored (their specs are not read)."""
        stored = (sa.select(runs.c.experiment_id, sa.func.count().label("stored")).group_by(runs.c.experiment_id)
                  .subquery())
        e = experiments.c
        q = (sa.select(e.id, e.name, e.spec_path, e.status, e.created_at, e.finished_at, e.plan,
                       sa.func.coalesce(stored.c.stored, 0).label("stored"))
             .outerjoin(stored, stored.c.experiment_id == experiments.c.id).order_by(experiments.c.id.desc()))
        if statuses:
            q = q.where(experiments.c.status.in_(statuses))
        with self.engine.connect() as c:
            return [dict(r) for r in c.execute(q).mappings()]

    def fingerprint(self) -> tuple:
        """Changes whenever a run, an experiment or a monitoring interval's running bound is stored, an
        experiment changes state, or a board of the lab's lease table does (down, up, given up): a cheap poll."""
        from .leases import boards
        with self.engine.connect() as c:
            r = c.execute(sa.select(sa.func.count(), sa.func.max(runs.c.id))).one()
            e = c.execute(sa.select(sa.func.count(), sa.func.max(experiments.c.id),
                                    sa.func.max(experiments.c.finished_at),
                                    sa.func.sum(sa.case((experiments.c.status == "running", 1), else_=0)))).one()
            b = c.execute(sa.select(sa.func.count()).select_from(running_bounds)).scalar_one()
            lab = c.execute(sa.select(sa.func.count(), sa.func.max(boards.c.updated_at))).one()
        return (*r, *e, b, *lab)

    def chunks(self, run_id: int, columns: list[str] | None = None) -> dict[str, list[np.ndarray]]:
        """The raw samples of a run as stored: column name -> list of arrays, in measurement order."""
        import numpy as np
        if self.engine.dialect.name == "sqlite":
            with self.engine.connect() as c:
                return read_chunks(c.connection.driver_connection, run_id, columns)
        q = (sa.select(sample_chunks.c.column, sample_chunks.c.dtype, sample_chunks.c.data)
             .where(sample_chunks.c.run_id == run_id).order_by(sample_chunks.c.column, sample_chunks.c.chunk))
        if columns:
            q = q.where(sample_chunks.c.column.in_(columns))
        parts: dict[str, list[np.ndarray]] = {}
        with self.engine.connect() as c:
            for name, dtype, data in c.execute(q):
                parts.setdefault(name, []).append(np.frombuffer(data, dtype=np.dtype(dtype)))
        return parts

    def causes(self, run_id: int) -> list[dict]:
        """The explained samples of a run (setting explain), largest value first: each with its causes."""
        q = (sa.select(sample_causes).where(sample_causes.c.run_id == run_id)
             .order_by(sample_causes.c.value_ns.desc(), sample_causes.c.sample_index))
        with self.engine.connect() as c:
            return [{**{k: r[k] for k in CAUSE_COLUMNS}, **(r["detail"] or {})} for r in c.execute(q).mappings()]

    # --- monitoring: the running bound of each interval --------------------------------------------------
    def add_running_bound(self, run_id: int, intervals: int, worst_case: dict, reason: str | None) -> None:
        """Record the worst case fitted after interval `run_id` (once: a second record of it is ignored)."""
        try:
            with self.transaction() as c:
                c.execute(running_bounds.insert().values(run_id=run_id, intervals=intervals,
                                                         value_ns=worst_case.get("value_ns"), reason=reason,
                                                         worst_case=worst_case))
        except sa.exc.IntegrityError:
            pass   # already recorded (a second controller's view, or --resume)

    def running_bounds(self, run_ids: list[int]) -> dict[int, dict]:
        """The recorded running bounds of these intervals: run id -> {intervals, value_ns, reason}."""
        if not run_ids:
            return {}
        q = (sa.select(running_bounds.c.run_id, running_bounds.c.intervals, running_bounds.c.value_ns,
                       running_bounds.c.reason).where(running_bounds.c.run_id.in_(run_ids)))
        with self.engine.connect() as c:
            return {r.run_id: {"intervals": r.intervals, "value_ns": r.value_ns, "reason": r.reason}
                    for r in c.execute(q)}


def bare_engine(db: str | None) -> sa.Engine:
    """An engine for the store at `db`, without creating or migrating anything (for `rtscope db`)."""
    try:
        url = sa.engine.make_url(resolve_url(db))
        return sa.create_engine(url, connect_args=PG_KEEPALIVES if url.get_backend_name() == "postgresql" else {})
    except SQLAlchemyError as e:
        raise UsageError(f"invalid store URL {db!r}: {e}") from None


def _read_only_engine(url: sa.engine.URL) -> sa.Engine:
    """An engine that cannot write the store; connections are checked before use, so a database that went
    away and came back is reconnected to."""
    if url.get_backend_name() == "sqlite":
        path = Path(url.database or "")
        if not path.is_file():
            raise UsageError(f"no store at {path}: give an existing store with --db (runs are stored by "
                             "`rtscope run`, `rtscope import` or `rtscope monitor`)")
        # mode=ro: SQLite itself refuses every write. The file's WAL mode (set by writers) is kept.
        ro = sa.engine.make_url(f"sqlite:///file:{quote(str(path.resolve()))}?mode=ro&uri=true")
        engine = sa.create_engine(ro, pool_pre_ping=True)
        sa.event.listen(engine, "connect", _sqlite_read_pragmas)
        return engine
    if url.get_backend_name() == "postgresql":
        return sa.create_engine(url, pool_pre_ping=True,
                                connect_args={"options": "-c default_transaction_read_only=on", **PG_KEEPALIVES})
    return sa.create_engine(url, pool_pre_ping=True)


def _sqlite_read_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA mmap_size=268435456")
    cur.close()


def store_error(exc: BaseException) -> bool:
    """Whether an exception is the store's (SQLAlchemy's: the database refused or failed something)."""
    return isinstance(exc, sa.exc.SQLAlchemyError)


class StoreUnreachable(RtscopeError):
    """The store cannot be opened: its server does not answer (a command whose writes can wait in the spool,
    store/spool.py, goes on; the others stop with this one line)."""


def unreachable(exc: BaseException) -> bool:
    """Whether an error raised by a store's method means the database cannot be reached (server down,
    connection lost) rather than a mistake: the caller may say so and try again later."""
    return isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError, StoreUnreachable)) or \
        (isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated)


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    # Large pages: sample blobs of megabytes then span few overflow pages (2-3x faster loads).
    # Takes effect only when the file is created, so it must precede WAL mode.
    cur.execute("PRAGMA page_size=65536")
    cur.execute("PRAGMA journal_mode=WAL")
    # Reads of sample blobs come straight from the mapped file: one copy fewer than read().
    cur.execute("PRAGMA mmap_size=268435456")
    cur.close()
