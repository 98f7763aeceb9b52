"""The result store: runs, their metadata and every raw sample.

A SQLite file by default (./rtscope.db); any SQLAlchemy URL otherwise. `Store` reads a SQLite store at this
rtscope's schema version with the standard library alone (store/sqlite_read.py), so that `rtscope runs` and `show`
start without SQLAlchemy; everything else (writes, migrations, PostgreSQL) goes through SQLAlchemy Core
(store/sql.py, tables in store/tables.py), opened on first use.

The only package that speaks SQL (an import-linter contract). It imports only the leaf modules (the sample file,
errors, the version); the analysis and the layers above read runs through it.

`Store.keeper` (store/spool.py) is how a command that measures writes: to the store, or, while the store is
unreachable, to a spool on this machine that is written to the store once it answers again (by this command, by
the next rtscope that opens the store, or by `rtscope db flush-spool`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from . import sqlite_read
from .records import DEFAULT_DB, DuplicateRun, Run, resolve_url, to_jsonable

if TYPE_CHECKING:
    import numpy as np

    from .spool import Keeper
    from .sql import SqlStore

# Names that need SQLAlchemy, imported when first asked for (`from rtscope.store import metadata`).
_LAZY = {"metadata": "tables", "experiments": "tables", "runs": "tables", "sample_chunks": "tables",
         "sample_causes": "tables", "bare_engine": "sql", "unreachable": "sql", "store_error": "sql",
         "SqlStore": "sql", "CHUNK": "sql"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)


class Store:
    """A store, read and written.

    read_only: the store as it is, never written (rtscope serve): SQLite opened with mode=ro, PostgreSQL
    sessions in read-only transactions; nothing is created or migrated, a store at another schema version is
    refused.

    The reads of `runs` and `show` (runs, get_run, chunks, samples, causes) come from the SQLite read path while
    nothing else was asked of the store; the first other use (a write, `engine`, `tunes`...) opens the store
    through SQLAlchemy, which then serves every read too, so a process sees its own writes.
    """

    def __init__(self, db: str | None = None, *, read_only: bool = False, flush_spool: bool = True,
                 open_later: bool = False):
        """flush_spool: write what an earlier rtscope left in this store's spool (store/spool.py) now; what it
        wrote is `keeper.last`. open_later: a store whose server does not answer now is opened by its first
        use, its keeper's writes spooled until it answers (`rtscope import`); else that is an error now."""
        self.url = resolve_url(db)
        self.read_only = read_only
        self._sql: SqlStore | None = None
        self._keeper: Keeper | None = None
        self._fast = None if read_only else sqlite_read.open_current(self.url)
        if self._fast is None:
            try:
                self.sql  # noqa: B018  (opens, creates or refuses the store now, as it always did)
            except Exception as e:
                from .sql import unreachable
                if not (open_later and unreachable(e)):
                    raise
                return
        if flush_spool and not read_only and self.keeper.spool.files():
            self.keeper.flush()

    @property
    def keeper(self) -> Keeper:
        """The writes of a command that measures, spooled while the store is unreachable (store/spool.py)."""
        if self._keeper is None:
            from .spool import Keeper, Spool, hide_password
            self._keeper = Keeper(lambda: self.sql, Spool(self.url, hide_password(self.url)))
        return self._keeper

    @property
    def sql(self) -> SqlStore:
        """The store through SQLAlchemy (store/sql.py), opened on first use."""
        if self._sql is None:
            from .sql import SqlStore
            self._sql = SqlStore(self.url, read_only=self.read_only)
            self._fast = None  # not closed here: a read under way in another thread finishes with it
        return self._sql

    def __getattr__(self, name: str) -> Any:
        # Everything but the reads below is SqlStore's: engine, tunes, transaction, add_run, experiments...
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.sql, name)

    def runs(self, *, workload: str | None = None, experiment_id: int | None = None,
             ids: list[int] | None = None) -> list[Run]:
        return (self._fast or self.sql).runs(workload=workload, experiment_id=experiment_id, ids=ids)

    def get_run(self, run_id: int) -> Run:
        found = self.runs(ids=[run_id])
        if not found:
            raise UsageError(f"no run {run_id} in store {self.url} (see `rtscope runs`)")
        return found[0]

    def chunks(self, run_id: int, columns: list[str] | None = None) -> dict[str, list[np.ndarray]]:
        """The raw samples of a run as stored: column name -> list of arrays, in measurement order."""
        return (self._fast or self.sql).chunks(run_id, columns)

    def samples(self, run_id: int, columns: list[str] | None = None) -> dict[str, np.ndarray]:
        """The raw samples of a run, column name -> array, in measurement order."""
        import numpy as np
        return {k: (v[0] if len(v) == 1 else np.concatenate(v)) for k, v in self.chunks(run_id, columns).items()}

    def primary_samples(self, run: Run) -> np.ndarray:
        import numpy as np
        name = run.primary["name"]
        return self.samples(run.id, [name]).get(name, np.empty(0))

    def causes(self, run_id: int) -> list[dict]:
        """The explained samples of a run (setting explain), largest value first: each with its causes."""
        return (self._fast or self.sql).causes(run_id)


__all__ = ["DEFAULT_DB", "DuplicateRun", "Run", "Store", "resolve_url", "to_jsonable", *_LAZY]
