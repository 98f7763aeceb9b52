"""What a store holds, as Python sees it: the `Run` record, where a store lives, JSON output.

Free of SQLAlchemy (and of numpy): `rtscope runs` and `show` read a SQLite store with the standard library alone
(store/sqlite_read.py), and this is all of the store they need besides.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import RtscopeError, UsageError

DEFAULT_DB = "rtscope.db"

# The columns of the tables `runs` and `sample_causes` that hold JSON (store/tables.py; a test checks they agree).
RUN_JSON_COLUMNS = ("settings", "params", "columns", "header", "trailer", "environment", "tags")
CAUSE_COLUMNS = ("sample_index", "thread", "cpu", "value_ns", "start_ns", "unexplained_ns")


def resolve_url(db: str | None) -> str:
    """--db / RTSCOPE_DB: a SQLAlchemy URL, or a plain path meaning a SQLite file.
    postgresql://user@host/db (and postgres://) use psycopg 3, which rtscope installs."""
    db = db or os.environ.get("RTSCOPE_DB") or DEFAULT_DB
    if "://" not in db:
        return f"sqlite:///{Path(db).expanduser()}"
    scheme, rest = db.split("://", 1)
    return f"postgresql+psycopg://{rest}" if scheme in ("postgresql", "postgres") else db


def check_sqlite_file(path: Path) -> None:
    """A SQLite store at `path` can be created or written, or a UsageError says why not."""
    try:
        _check_writable(path)
    except OSError as e:
        raise UsageError(f"cannot use store {path}: {e.strerror}") from None


def _check_writable(path: Path) -> None:
    parent = path.resolve().parent
    if path.is_dir():
        raise UsageError(f"store path {path} is a directory; give a file name such as {path / DEFAULT_DB}")
    if not parent.is_dir():
        raise UsageError(f"cannot create store {path}: directory {parent} does not exist")
    target = path if path.exists() else parent
    if not os.access(target, os.W_OK):
        raise UsageError(f"cannot write store {path}: {target} is not writable")


class DuplicateRun(RtscopeError):
    """The experiment's plan index is stored already (another process resuming the same experiment)."""


@dataclass(frozen=True)
class Run:
    """A stored run's metadata, typed (samples are loaded separately with Store.samples).

    `machine` is the machine record read from the target (sysinfo), kept in the table's column
    `environment` for stores made by earlier versions. `run["name"]` reads a field too.
    """

    id: int
    workload: str = ""
    variant: str = ""
    runtime: str = ""
    tool: str = ""
    tool_version: str = ""
    rtscope_version: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    columns: list[dict] = field(default_factory=list)
    header: dict[str, Any] = field(default_factory=dict)
    trailer: dict[str, Any] = field(default_factory=dict)
    machine: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    n_samples: int = 0
    started_at: str = ""
    finished_at: str | None = None
    stored_at: str = ""
    experiment_id: int | None = None
    plan_index: int | None = None
    cell: str | None = None
    repetition: int | None = None
    source: str | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "Run":
        values = {k: v for k, v in row.items() if k in RUN_FIELDS}
        values["machine"] = row.get("environment") or {}
        return cls(**values)

    def __getitem__(self, key: str) -> Any:
        return self.machine if key == "environment" else getattr(self, key)

    @property
    def primary(self) -> dict:
        return self.columns[0]

    @property
    def n_measured(self) -> int:
        """How many samples the run measured: its tool's stated count (an import's summary), else its stored
        samples, else what its histograms count (a histogram-only run stores no samples: n_samples is 0)."""
        summary = self.trailer.get("summary") if isinstance(self.trailer, dict) else None
        if isinstance(summary, dict) and isinstance(summary.get("n"), (int, float)):
            return int(summary["n"])
        if self.n_samples:
            return self.n_samples
        hists = (self.trailer.get("histograms") if isinstance(self.trailer, dict) else None) or {}
        return sum(int(h["n"]) if "n" in h else int(sum(h.get("counts", ())) + h.get("overflow", 0))
                   for h in hists.values() if isinstance(h, dict))   # as analysis.stats.summarize_histogram

    @property
    def label(self) -> str:
        return f"{self.workload} {self.variant} ({self.runtime})"

    @property
    def started_from(self) -> str | None:
        """How `started_at` is known, when not recorded by the tool or rtscope (None): `file modified` (an import
        whose tool records no start: the file's modification time) or `not recorded` (no time; older versions
        wrote the epoch for rtla and Xenomai)."""
        if not self.started_at or self.started_at.startswith("1970-01-01T00:00:00"):
            return "not recorded"
        return self.header.get("started_at_source") if isinstance(self.header, dict) else None


RUN_FIELDS = {f.name for f in dataclasses.fields(Run)} - {"machine"}


def to_jsonable(obj: Any) -> Any:
    """JSON-safe copy (numpy scalars, NaN) for --json output."""
    return json.loads(json.dumps(obj, default=lambda o: o.item() if hasattr(o, "item") else str(o)))
