"""Reading a SQLite store with the standard library's sqlite3 alone: what `rtscope runs` and `show` need.

Importing SQLAlchemy takes about 0.1 s, most of what these commands would cost (issue 26). A store at this
rtscope's schema version is read here (runs, their samples, their explained samples); any other store, and every
write, goes through SQLAlchemy (store/sql.py), which creates, refuses or asks to migrate it as always.
The queries name the columns of store/tables.py; tests/test_store.py checks both read the same.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from . import migrations
from .records import CAUSE_COLUMNS, RUN_JSON_COLUMNS, Run, check_sqlite_file

if TYPE_CHECKING:
    import numpy as np

_READ_SLICE = 1 << 20  # bytes per read of a blob into a run's array


def file_of(url: str) -> Path | None:
    """The file of a plain `sqlite:///PATH` URL (what a --db path becomes); None for anything else: other
    databases, in-memory stores, URLs with options or escapes, which SQLAlchemy reads."""
    if not url.startswith("sqlite:///") or any(c in url for c in "?#%"):
        return None
    path = url.removeprefix("sqlite:///")
    return Path(path) if path and path != ":memory:" else None


def open_current(url: str) -> SqliteReader | None:
    """A reader of the store at `url` when it is an existing SQLite file at this rtscope's schema version
    (after the checks that opening it for writing makes); None when SQLAlchemy must open it."""
    path = file_of(url)
    if path is None or not path.is_file():
        return None
    check_sqlite_file(path)
    try:
        # Opened as SQLAlchemy opens it (mode=rw: but never creating a file), though only read: a process that
        # reads and then writes the store has connections of one kind to it, as before this read path.
        # check_same_thread=False: a Store may be read from several threads (the library serialises them).
        conn = sqlite3.connect(f"file:{quote(str(path.resolve()))}?mode=rw", uri=True, check_same_thread=False)
    except sqlite3.Error:
        return None
    try:
        if schema_version(conn) == migrations.LATEST:
            conn.execute("PRAGMA mmap_size=268435456")  # as the SQLAlchemy engine reads: from the mapped file
            return SqliteReader(conn)
    except sqlite3.Error:
        pass  # not a database, or a damaged one: SQLAlchemy's error says so
    conn.close()
    return None


def schema_version(conn: sqlite3.Connection) -> int:
    """As migrations.current: 0 for an empty database, 1 for a store of rtscope 0.1 (no version table)."""
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "schema_version" in tables:
        row = conn.execute("SELECT version FROM schema_version WHERE id = 1").fetchone()
        return row[0] if row else 0
    return 1 if "runs" in tables else 0


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


class SqliteReader:
    """The reads of `runs` and `show`, on one sqlite3 connection that only reads."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn  # closed with the reader (sqlite3 closes a connection it frees)

    def runs(self, *, workload: str | None = None, experiment_id: int | None = None,
             ids: list[int] | None = None) -> list[Run]:
        where, args = [], []
        if workload:
            where.append("workload = ?")
            args.append(workload)
        if experiment_id is not None:
            where.append("experiment_id = ?")
            args.append(experiment_id)
        if ids is not None:
            where.append(f"id IN ({', '.join('?' * len(ids))})" if ids else "0")
            args.extend(ids)
        cur = self.conn.execute("SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "") +
                                " ORDER BY id", args)
        names = [d[0] for d in cur.description]
        found = []
        for row in cur:
            values = dict(zip(names, row))
            for name in RUN_JSON_COLUMNS:
                values[name] = _json(values.get(name))
            found.append(Run.from_row(values))
        return found

    def causes(self, run_id: int) -> list[dict]:
        """As Store.causes: largest value first."""
        cur = self.conn.execute(f"SELECT {', '.join(CAUSE_COLUMNS)}, detail FROM sample_causes WHERE run_id = ? "
                                "ORDER BY value_ns DESC, sample_index", (run_id,))
        return [{**dict(zip(CAUSE_COLUMNS, row)), **(_json(row[-1]) or {})} for row in cur]

    def chunks(self, run_id: int, columns: list[str] | None) -> dict[str, list[np.ndarray]]:
        return read_chunks(self.conn, run_id, columns)


def read_chunks(conn: sqlite3.Connection, run_id: int, columns: list[str] | None) -> dict[str, list[np.ndarray]]:
    """The raw samples of a run, column name -> [one array]: each column's blobs read in slices straight into
    one array (a column's chunks share a dtype).

    Four times faster than fetching the blobs as bytes objects: a large numpy
    array is backed by huge pages, and the slice buffer is reused, so loading
    costs a copy and not a page fault per 4 KiB.
    """
    import numpy as np
    q = 'SELECT rowid, "column", dtype, length(data) FROM sample_chunks WHERE run_id = ?'
    if columns:
        q += f' AND "column" IN ({", ".join("?" * len(columns))})'
    rows = conn.execute(q + ' ORDER BY "column", chunk', (run_id, *(columns or []))).fetchall()
    parts: dict[str, list[np.ndarray]] = {}
    for name in dict.fromkeys(row[1] for row in rows):
        blobs = [(rowid, length) for rowid, column, _, length in rows if column == name]
        data = np.empty(sum(length for _, length in blobs), dtype=np.uint8)
        at = 0
        for rowid, _ in blobs:
            with conn.blobopen("sample_chunks", "data", rowid, readonly=True) as blob:
                while piece := blob.read(_READ_SLICE):
                    data[at:at + len(piece)] = np.frombuffer(piece, dtype=np.uint8)
                    at += len(piece)
        dtype = next(d for _, column, d, _ in rows if column == name)
        parts[name] = [data.view(np.dtype(dtype))]
    return parts
