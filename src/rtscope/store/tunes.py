"""The shared state of tunes (`rtscope tune`): the tune, its candidates, and its planned runs (slots).

Every trial is an ordinary run of the tune's experiment, stored with its plan index; a slot says which
candidate and phase a plan index belongs to. Several rtscope processes (other hosts, one PostgreSQL store)
work on one tune through these tables:

- a slot is claimed by one UPDATE that succeeds only while it is unclaimed (or its claim's lease ran out:
  a process killed with -9), so no run is made twice; a stored run marks its slot done;
- the next round is planned under a compare-and-set of the tune's round number, in the same transaction that
  inserts its candidates and slots, so exactly one process plans each round.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

metadata = sa.MetaData()

tunes = sa.Table(
    "tunes", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("experiment_id", sa.Integer, nullable=False),   # the experiment whose runs are the trials
    sa.Column("spec_path", sa.String),
    sa.Column("target", sa.String, nullable=False),
    sa.Column("seed", sa.BigInteger, nullable=False),
    sa.Column("options", sa.JSON, nullable=False),            # goal, budget, alpha, width, confirm, baseline
    sa.Column("phase", sa.String, nullable=False),            # race / confirm / finished
    sa.Column("round", sa.Integer, nullable=False),           # rounds planned so far (the compare-and-set)
    sa.Column("status", sa.String, nullable=False),           # running / interrupted / finished
    sa.Column("created_at", sa.String, nullable=False),
    sa.Column("started", sa.Float, nullable=False),           # epoch seconds, for a duration budget
    sa.Column("finished_at", sa.String),
    sa.Column("result", sa.JSON),
)

candidates = sa.Table(
    "tune_candidates", metadata,
    sa.Column("tune_id", sa.Integer, primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True),
    sa.Column("knobs", sa.JSON, nullable=False),              # knob -> value (the baseline: the knobs it sets)
    sa.Column("cell", sa.String, nullable=False),
    sa.Column("origin", sa.String, nullable=False),           # baseline / proposed
    sa.Column("round", sa.Integer, nullable=False),           # the round it entered the race
    sa.Column("dropped_round", sa.Integer),
    sa.Column("reason", sa.String),
)

slots = sa.Table(
    "tune_slots", metadata,
    sa.Column("tune_id", sa.Integer, primary_key=True),
    sa.Column("plan_index", sa.Integer, primary_key=True),
    sa.Column("candidate", sa.Integer, nullable=False),
    sa.Column("phase", sa.String, nullable=False),            # race / confirm
    sa.Column("round", sa.Integer, nullable=False),
    sa.Column("repetition", sa.Integer, nullable=False),
    sa.Column("request", sa.JSON, nullable=False),            # the planned run (experiment.PlannedRun's JSON)
    sa.Column("claimed_by", sa.String),
    sa.Column("claimed_at", sa.Float),
)


class TuneTables:
    """The tune tables of one store (Store.tunes)."""

    def __init__(self, engine: sa.Engine, runs: sa.Table, experiments: sa.Table):
        self.engine, self.runs, self.experiments = engine, runs, experiments

    def create(self, row: dict) -> int:
        with self.engine.begin() as c:
            return c.execute(tunes.insert().values(**row)).inserted_primary_key[0]

    def get(self, tune_id: int) -> dict | None:
        with self.engine.connect() as c:
            row = c.execute(sa.select(tunes).where(tunes.c.id == tune_id)).mappings().first()
        return dict(row) if row else None

    def find(self, *, spec_path: str | None = None, statuses: tuple[str, ...] | None = None) -> list[dict]:
        q = sa.select(tunes).order_by(tunes.c.id)
        if spec_path is not None:
            q = q.where(tunes.c.spec_path == spec_path)
        if statuses is not None:
            q = q.where(tunes.c.status.in_(statuses))
        with self.engine.connect() as c:
            return [dict(r) for r in c.execute(q).mappings()]

    def of_experiment(self, experiment_id: int) -> dict | None:
        with self.engine.connect() as c:
            row = c.execute(sa.select(tunes).where(tunes.c.experiment_id == experiment_id)).mappings().first()
        return dict(row) if row else None

    def update(self, tune_id: int, **values: Any) -> None:
        with self.engine.begin() as c:
            c.execute(tunes.update().where(tunes.c.id == tune_id).values(**values))

    def candidates(self, tune_id: int) -> list[dict]:
        q = sa.select(candidates).where(candidates.c.tune_id == tune_id).order_by(candidates.c.number)
        with self.engine.connect() as c:
            return [dict(r) for r in c.execute(q).mappings()]

    def slots(self, tune_id: int) -> list[dict]:
        """Every slot, with `run_id` (None while its run is not stored)."""
        r = self.runs
        q = (sa.select(slots, r.c.id.label("run_id"))
             .select_from(slots.join(tunes, tunes.c.id == slots.c.tune_id)
                          .outerjoin(r, sa.and_(r.c.experiment_id == tunes.c.experiment_id,
                                                r.c.plan_index == slots.c.plan_index)))
             .where(slots.c.tune_id == tune_id).order_by(slots.c.plan_index))
        with self.engine.connect() as c:
            return [dict(row) for row in c.execute(q).mappings()]

    def advance(self, tune_id: int, from_round: int, *, phase: str, new_candidates: list[dict],
                drops: list[tuple[int, int, str]], new_slots: list[dict], status: str | None = None,
                result: dict | None = None, finished_at: str | None = None) -> bool:
        """Plan round from_round + 1 (or finish): only if no other process did it first. True if this one did."""
        with self.engine.begin() as c:
            values: dict[str, Any] = {"round": from_round + 1, "phase": phase}
            if status is not None:
                values.update(status=status, finished_at=finished_at)
            if result is not None:
                values["result"] = result
            done = c.execute(tunes.update().where(tunes.c.id == tune_id, tunes.c.round == from_round)
                             .values(**values)).rowcount
            if done != 1:
                return False
            if new_candidates:
                c.execute(candidates.insert(), [{"tune_id": tune_id, **row} for row in new_candidates])
            for number, round_, reason in drops:
                c.execute(candidates.update().where(candidates.c.tune_id == tune_id, candidates.c.number == number)
                          .values(dropped_round=round_, reason=reason))
            if new_slots:
                c.execute(slots.insert(), [{"tune_id": tune_id, **row} for row in new_slots])
        return True

    def claim(self, tune_id: int, worker: str, now: float, lease_s: float) -> dict | None:
        """The first slot whose run is not stored and that nobody holds (or whose holder's lease ran out),
        now held by `worker`; None when there is none."""
        for slot in self.slots(tune_id):
            got = self.claim_slot(tune_id, slot, worker, now, lease_s)
            if got is not None:
                return got
        return None

    def claim_slot(self, tune_id: int, slot: dict, worker: str, now: float, lease_s: float) -> dict | None:
        """That slot (as `slots` gave it), now held by `worker`, when its run is not stored and nobody holds it
        (or its holder's lease ran out); else None."""
        if slot["run_id"] is not None:
            return None
        if slot["claimed_by"] is not None and slot["claimed_at"] >= now - lease_s:
            return None
        free = sa.or_(slots.c.claimed_by.is_(None), slots.c.claimed_at < now - lease_s)
        with self.engine.begin() as c:
            got = c.execute(slots.update().where(slots.c.tune_id == tune_id,
                                                 slots.c.plan_index == slot["plan_index"], free)
                            .values(claimed_by=worker, claimed_at=now)).rowcount
        return {**slot, "claimed_by": worker, "claimed_at": now} if got == 1 else None

    def discard(self, tune_id: int) -> bool:
        """Remove a tune that stored no run (its start failed) with its experiment, so no empty experiment is
        left behind; only while no run of it is stored and no process holds one of its slots (another process
        that joined it goes on). True if it was removed."""
        t = self.get(tune_id)
        if t is None:
            return False
        exp_id = t["experiment_id"]
        try:
            with self.engine.begin() as c:
                stored = c.execute(sa.select(sa.func.count()).select_from(self.runs)
                                   .where(self.runs.c.experiment_id == exp_id)).scalar()
                held = c.execute(sa.select(sa.func.count()).select_from(slots)
                                 .where(slots.c.tune_id == tune_id, slots.c.claimed_by.is_not(None))).scalar()
                if stored or held:
                    return False
                c.execute(slots.delete().where(slots.c.tune_id == tune_id))
                c.execute(candidates.delete().where(candidates.c.tune_id == tune_id))
                c.execute(tunes.delete().where(tunes.c.id == tune_id))
                c.execute(self.experiments.delete().where(self.experiments.c.id == exp_id))
        except sa.exc.IntegrityError:     # a run stored meanwhile by another process: all rolled back, it stays
            return False
        return True

    def release(self, tune_id: int, plan_index: int, worker: str) -> None:
        """Give a slot back (its run was interrupted or failed): another process, or a resume, makes it."""
        with self.engine.begin() as c:
            c.execute(slots.update().where(slots.c.tune_id == tune_id, slots.c.plan_index == plan_index,
                                           slots.c.claimed_by == worker).values(claimed_by=None, claimed_at=None))
