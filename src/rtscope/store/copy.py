"""Copy a store into another (a lab's SQLite results into PostgreSQL, and back).

Experiments and runs get new ids in the destination (its own sequences);
each run goes over with all its sample chunks in one transaction, so an
interrupted copy leaves whole runs only. A copy can be repeated: what the
destination already has (the same experiment, the same run: matched by their
recorded identity, not by id) is skipped, so a second copy of a growing store
brings only what is new.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from . import Store
from .tables import experiments, running_bounds, runs, sample_causes, sample_chunks

EXPERIMENT_KEY = ("name", "created_at", "seed", "spec_path")
RUN_KEY = ("started_at", "stored_at", "workload", "variant", "runtime", "tool", "n_samples", "plan_index")


@dataclass
class Copied:
    experiments: int = 0
    runs: int = 0
    skipped_runs: int = 0
    chunks: int = 0


def _key(row, names) -> tuple:
    return tuple(row[n] for n in names)


def copy(src: Store, dst: Store, progress=None) -> Copied:
    out = Copied()
    with dst.engine.connect() as c:
        have_exp = {_key(r, EXPERIMENT_KEY): r["id"] for r in c.execute(sa.select(experiments)).mappings()}
    exp_ids: dict[int, int] = {}
    with src.engine.connect() as c:
        for r in c.execute(sa.select(experiments).order_by(experiments.c.id)).mappings():
            key = _key(r, EXPERIMENT_KEY)
            if key in have_exp:
                exp_ids[r["id"]] = have_exp[key]
                continue
            values = {k: v for k, v in r.items() if k != "id"}
            with dst.transaction() as d:
                exp_ids[r["id"]] = d.execute(experiments.insert().values(**values)).inserted_primary_key[0]
            out.experiments += 1
    with dst.engine.connect() as c:
        have_runs = {(r["experiment_id"], *_key(r, RUN_KEY))
                     for r in c.execute(sa.select(runs.c.experiment_id, *(runs.c[n] for n in RUN_KEY))).mappings()}
    with src.engine.connect() as c:
        ids = [i for (i,) in c.execute(sa.select(runs.c.id).order_by(runs.c.id))]
    for run_id in ids:
        with src.engine.connect() as c:
            row = c.execute(sa.select(runs).where(runs.c.id == run_id)).mappings().one()
            values = {k: v for k, v in row.items() if k != "id"}
            if values["experiment_id"] is not None:
                values["experiment_id"] = exp_ids[values["experiment_id"]]
            if (values["experiment_id"], *_key(values, RUN_KEY)) in have_runs:
                out.skipped_runs += 1
                continue
            with dst.transaction() as d:
                new_id = d.execute(runs.insert().values(**values)).inserted_primary_key[0]
                for chunk in c.execute(sa.select(sample_chunks).where(sample_chunks.c.run_id == run_id)).mappings():
                    d.execute(sample_chunks.insert().values(**{**chunk, "run_id": new_id}))
                    out.chunks += 1
                for table in (sample_causes, running_bounds):
                    for row in c.execute(sa.select(table).where(table.c.run_id == run_id)).mappings():
                        d.execute(table.insert().values(**{**row, "run_id": new_id}))
        out.runs += 1
        if progress:
            progress(out)
    return out
