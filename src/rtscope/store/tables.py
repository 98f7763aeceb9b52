"""The store's tables (SQLAlchemy Core), for SQLite and PostgreSQL alike.

Imported only where SQLAlchemy works on the store (writes, migrations, PostgreSQL, `rtscope db`): the SQLite read
path of `runs` and `show` (store/sqlite_read.py) names its columns in plain SQL. A table changes through a step
in store/migrations.py.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

experiments = sa.Table(
    "experiments", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.String, nullable=False),
    sa.Column("spec", sa.JSON, nullable=False),          # the parsed spec, as run
    sa.Column("spec_path", sa.String),
    sa.Column("seed", sa.BigInteger),
    sa.Column("plan", sa.JSON),                          # the ordered list of planned runs
    sa.Column("status", sa.String, nullable=False),      # running / finished / interrupted
    sa.Column("created_at", sa.String, nullable=False),
    sa.Column("finished_at", sa.String),
)

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("experiment_id", sa.Integer, sa.ForeignKey("experiments.id"), index=True),
    sa.Column("plan_index", sa.Integer),                 # position in the experiment's plan
    sa.Column("cell", sa.String),                        # configuration key within the experiment
    sa.Column("repetition", sa.Integer),
    sa.Column("workload", sa.String, nullable=False),
    sa.Column("variant", sa.String, nullable=False),
    sa.Column("runtime", sa.String, nullable=False),
    sa.Column("tool", sa.String, nullable=False),
    sa.Column("tool_version", sa.String, nullable=False),
    sa.Column("rtscope_version", sa.String, nullable=False),
    sa.Column("started_at", sa.String, nullable=False),
    sa.Column("finished_at", sa.String),
    sa.Column("stored_at", sa.String, nullable=False),
    sa.Column("settings", sa.JSON, nullable=False),
    sa.Column("params", sa.JSON, nullable=False),
    sa.Column("columns", sa.JSON, nullable=False),
    sa.Column("header", sa.JSON, nullable=False),        # the whole sample-file header
    sa.Column("trailer", sa.JSON, nullable=False),
    sa.Column("environment", sa.JSON, nullable=False),   # sysinfo.snapshot()
    sa.Column("tags", sa.JSON, nullable=False),
    sa.Column("n_samples", sa.BigInteger, nullable=False),
    sa.Column("source", sa.String),                      # where the samples came from (probe, import path)
)

sample_chunks = sa.Table(
    "sample_chunks", metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("column", sa.String, primary_key=True),
    sa.Column("chunk", sa.Integer, primary_key=True),
    sa.Column("dtype", sa.String, nullable=False),       # numpy dtype string, little-endian
    sa.Column("data", sa.LargeBinary, nullable=False),
)

# Setting explain: the causes of a run's worst samples (docs/explain.md), one row per explained sample.
sample_causes = sa.Table(
    "sample_causes", metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("sample_index", sa.BigInteger, primary_key=True),  # position in the run's samples
    sa.Column("thread", sa.Integer),
    sa.Column("cpu", sa.Integer),
    sa.Column("value_ns", sa.BigInteger, nullable=False),
    sa.Column("start_ns", sa.BigInteger),                    # CLOCK_MONOTONIC of the target
    sa.Column("unexplained_ns", sa.BigInteger, nullable=False),
    sa.Column("detail", sa.JSON, nullable=False),            # causes, self_ns, idle_ns, measuring thread, note
)

# `rtscope monitor`: the worst case of a monitoring's intervals so far, as the controller fitted it after each
# interval (analysis.tail_bound.WorstCase.to_json), so that `rtscope serve` and `rtscope lab` show it without a fit.
running_bounds = sa.Table(
    "running_bounds", metadata,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("intervals", sa.Integer, nullable=False),        # the intervals of the run's phase fitted together
    sa.Column("value_ns", sa.Float),                           # the bound (None: no bound, `reason` says why)
    sa.Column("reason", sa.String),
    sa.Column("worst_case", sa.JSON, nullable=False),          # WorstCase.to_json()
)

# The store's schema version (store/migrations.py); outside `metadata`, which holds the tables the steps create.
schema_version = sa.Table(
    "schema_version", sa.MetaData(),
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
)
