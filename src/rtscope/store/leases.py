"""The lab's shared state (`rtscope monitor` of a fleet, `rtscope lab`): which controller watches which board.

Two tables, documented for whoever reads them (docs/lab.md, "Controllers and leases"):

lab_controllers  one row per controller process (`host:pid`): when it started, its fleet's size, and until
                 when it is alive (`seen_until`, renewed with its leases). A controller counts its live peers
                 here to take only its share of the unwatched boards.
lab_boards       one row per board (target name): the controller that holds its lease and until when
                 (`lease_until`), its state (watching / down / finished / released), why it is down, the
                 board's monitoring experiment, and its last stored interval (run id and end time).

Every time is the database's clock in epoch seconds (PostgreSQL's clock_timestamp(); SQLite's controllers
share a machine), so controllers on machines whose clocks differ agree on when a lease runs out. A board is
taken by one UPDATE that succeeds only while nobody holds it or its lease ran out; a lease is renewed, and a
run is stored, only by an UPDATE that still finds this controller as the holder (a compare-and-set), so a
controller that lost its lease stores nothing and two controllers never watch one board.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

metadata = sa.MetaData()

WATCHING, DOWN, FINISHED, RELEASED, INCOMPLETE = "watching", "down", "finished", "released", "incomplete"
STATES = (WATCHING, DOWN, FINISHED, RELEASED, INCOMPLETE)

controllers = sa.Table(
    "lab_controllers", metadata,
    sa.Column("name", sa.String, primary_key=True),           # host:pid
    sa.Column("host", sa.String, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),        # epoch seconds (database clock)
    sa.Column("seen_until", sa.Float, nullable=False),        # alive until then unless renewed
    sa.Column("boards", sa.Integer, nullable=False),          # how many boards its fleet names
)

boards = sa.Table(
    "lab_boards", metadata,
    sa.Column("target", sa.String, primary_key=True),         # the board: a defined target's name
    sa.Column("controller", sa.String),                       # the holder of the lease (None: nobody)
    sa.Column("lease_until", sa.Float),                       # epoch seconds (database clock)
    sa.Column("state", sa.String, nullable=False),            # watching / down / finished / released / incomplete
    sa.Column("reason", sa.String),                           # why it is down (incomplete: why given up)
    sa.Column("experiment_id", sa.Integer),                   # the board's monitoring experiment
    sa.Column("last_run_id", sa.Integer),                     # its last stored interval
    sa.Column("last_interval_at", sa.String),                 # when that interval ended (ISO 8601, UTC)
    sa.Column("intervals", sa.Integer, nullable=False, default=0),  # intervals stored by its monitoring
    sa.Column("updated_at", sa.Float, nullable=False),
)


def db_now(conn: sa.Connection) -> float:
    """The database's clock in epoch seconds (this machine's for SQLite, whose controllers share it)."""
    if conn.dialect.name == "postgresql":
        return float(conn.execute(sa.text("SELECT EXTRACT(EPOCH FROM clock_timestamp())")).scalar_one())
    return time.time()


def held_now(row: dict, now: float) -> bool:
    """A board's row is held: it names a controller whose lease has not run out (at `now`, the database's clock)."""
    return row["controller"] is not None and (row["lease_until"] or 0) >= now


class LeaseTables:
    """The lease tables of one store (Store.leases)."""

    def __init__(self, engine: sa.Engine):
        self.engine = engine

    # --- controllers ----------------------------------------------------------------------------------
    def join(self, name: str, host: str, pid: int, n_boards: int, lease_s: float) -> None:
        with self.engine.begin() as c:
            now = db_now(c)
            c.execute(controllers.delete().where(controllers.c.name == name))
            c.execute(controllers.insert().values(name=name, host=host, pid=pid, started_at=now,
                                                  seen_until=now + lease_s, boards=n_boards))

    def leave(self, name: str) -> None:
        with self.engine.begin() as c:
            c.execute(controllers.delete().where(controllers.c.name == name))

    def live_controllers(self) -> list[str]:
        with self.engine.connect() as c:
            now = db_now(c)
            return [r[0] for r in c.execute(sa.select(controllers.c.name).where(controllers.c.seen_until >= now)
                                            .order_by(controllers.c.name))]

    # --- boards ---------------------------------------------------------------------------------------
    def ensure(self, targets: list[str]) -> None:
        """A row for each board (released, nobody's), for those that have none yet."""
        with self.engine.begin() as c:
            have = {r[0] for r in c.execute(sa.select(boards.c.target).where(boards.c.target.in_(targets)))}
            now = db_now(c)
            for t in targets:
                if t in have:
                    continue
                try:
                    with c.begin_nested():
                        c.execute(boards.insert().values(target=t, state=RELEASED, intervals=0, updated_at=now))
                except sa.exc.IntegrityError:
                    pass  # another controller made it meanwhile

    def rows(self, targets: list[str] | None = None) -> tuple[float, list[dict]]:
        """(the database's now, every board's row with its experiment's status `experiment_status`), by name."""
        from .tables import experiments
        q = (sa.select(boards, experiments.c.status.label("experiment_status"))
             .outerjoin(experiments, experiments.c.id == boards.c.experiment_id).order_by(boards.c.target))
        if targets is not None:
            q = q.where(boards.c.target.in_(targets))
        with self.engine.connect() as c:
            return db_now(c), [dict(r) for r in c.execute(q).mappings()]

    def held(self) -> list[dict]:
        """The boards a live lease holds, as serve's lab and /metrics read them: target, controller, state ("up"
        while its controller watches it, "down" when the controller marked it so) and the reason."""
        now, rows = self.rows()
        return [{"target": r["target"], "controller": r["controller"],
                 "state": "down" if r["state"] == DOWN else "up", "reason": r["reason"]}
                for r in rows if held_now(r, now)]

    def claim(self, target: str, controller: str, lease_s: float) -> dict | None:
        """Take the board if nobody holds it or its holder's lease ran out; its row (now ours), else None."""
        with self.engine.begin() as c:
            now = db_now(c)
            free = sa.or_(boards.c.controller.is_(None), boards.c.lease_until < now,
                          boards.c.controller == controller)
            got = c.execute(boards.update().where(boards.c.target == target, free)
                            .values(controller=controller, lease_until=now + lease_s, updated_at=now)).rowcount
            if got != 1:
                return None
            return dict(c.execute(sa.select(boards).where(boards.c.target == target)).mappings().one())

    def renew(self, controller: str, targets: list[str], lease_s: float) -> set[str]:
        """Renew this controller's leases (and its own row); the boards it still holds."""
        with self.engine.begin() as c:
            now = db_now(c)
            c.execute(controllers.update().where(controllers.c.name == controller).values(seen_until=now + lease_s))
            if targets:
                c.execute(boards.update().where(boards.c.target.in_(targets), boards.c.controller == controller)
                          .values(lease_until=now + lease_s))
                return {r[0] for r in c.execute(sa.select(boards.c.target).where(
                    boards.c.target.in_(targets), boards.c.controller == controller))}
        return set()

    def hold(self, c: sa.Connection, target: str, controller: str, lease_s: float, **values: Any) -> bool:
        """In the caller's transaction: renew the lease and set `values` only if this controller still holds
        the board (the compare-and-set a stored interval goes through). True if it does."""
        now = db_now(c)
        return c.execute(boards.update().where(boards.c.target == target, boards.c.controller == controller)
                         .values(lease_until=now + lease_s, updated_at=now, **values)).rowcount == 1

    def update(self, target: str, controller: str, lease_s: float, **values: Any) -> bool:
        """Set the board's state (watching, down and its reason, its experiment) while this controller holds it."""
        with self.engine.begin() as c:
            return self.hold(c, target, controller, lease_s, **values)

    def release(self, target: str, controller: str, state: str, reason: str | None = None) -> None:
        """Give the board up (finished, incomplete, or released for another controller to take)."""
        with self.engine.begin() as c:
            self.give_back(c, target, controller, state, reason)

    def mark(self, target: str, state: str, reason: str | None = None, only: str | None = None,
             **values: Any) -> bool:
        """Set a board's state where no live lease holds it (a monitoring of that target alone holds none): its
        monitoring given up on (incomplete, the reason), or an `only`-state row set back when it is watched
        again. True if a row was written."""
        with self.engine.begin() as c:
            now = db_now(c)
            q = boards.update().where(boards.c.target == target,
                                      sa.or_(boards.c.controller.is_(None), boards.c.lease_until < now))
            if only is not None:
                q = q.where(boards.c.state == only)
            return c.execute(q.values(controller=None, lease_until=None, state=state, reason=reason, updated_at=now,
                                      **values)).rowcount == 1

    @staticmethod
    def give_back(c: sa.Connection, target: str, controller: str, state: str, reason: str | None = None) -> None:
        """release() in the caller's transaction (a spooled release, store/spool.py)."""
        c.execute(boards.update().where(boards.c.target == target, boards.c.controller == controller)
                  .values(controller=None, lease_until=None, state=state, reason=reason, updated_at=db_now(c)))

    @staticmethod
    def record(c: sa.Connection, target: str, controller: str, last_run_id: int, **values: Any) -> bool:
        """A spooled interval's board row (its last run, intervals), written later: only while this controller
        still holds the board and nothing newer is recorded, without renewing its lease (it may be gone)."""
        newer = sa.or_(boards.c.last_run_id.is_(None), boards.c.last_run_id < last_run_id)
        return c.execute(boards.update().where(boards.c.target == target, boards.c.controller == controller, newer)
                         .values(updated_at=db_now(c), last_run_id=last_run_id, **values)).rowcount == 1
